"""Environment metadata of a run: a registry of keys (type, unit, meaning) and the collector.

pyperf practice 10: every key has a declared type; ``CHECKED_KEYS`` are the ones two runs must agree
on before their cases may live in one file (``--resume`` refuses a mismatch); ``compare`` warns when
two runs differ in any of them but the commit.
Collecting never changes device state (no clock locking) and never fails: a value that cannot be
read is None.
"""
from __future__ import annotations

import platform
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hisparse import env
from hisparse.gitutil import git_or_none


@dataclass(frozen=True)
class MetadataKey:
    type: type | tuple[type, ...]
    unit: str | None
    description: str


REGISTRY: dict[str, MetadataKey] = {
    "machine": MetadataKey(str, None, "HISPARSE_MACHINE or the host name"),
    "gpu": MetadataKey(str, None, "device name of the GPU the run used; None on the reference backend"),
    "gpu_count": MetadataKey(int, None, "visible CUDA devices"),
    "compute_capability": MetadataKey(str, None, "major.minor"),
    "driver": MetadataKey(str, None, "NVIDIA driver version"),
    "cuda_runtime": MetadataKey(str, None, "CUDA version torch was built with"),
    "torch": MetadataKey(str, None, "torch.__version__"),
    "tvm_ffi": MetadataKey(str, None, "apache-tvm-ffi version"),
    "python": MetadataKey(str, None, "interpreter version"),
    "git_commit": MetadataKey(str, None, "HEAD of the source checkout (40 hex)"),
    "git_dirty": MetadataKey(bool, None, "uncommitted changes to tracked files"),
    "hisparse": MetadataKey(str, None, "package version"),
    "l2_bytes": MetadataKey(int, "bytes", "L2 cache size of the GPU"),
    "sm_count": MetadataKey(int, None, "streaming multiprocessors"),
    "cpu": MetadataKey(str, None, "processor model (/proc/cpuinfo's model name, else the architecture)"),
    # A swap pays per host page the GPU translates, and how much a translation costs is the host's:
    # two H100 SXM nodes with the same 55 GB/s pinned copy gathered the same scattered rows up to 1.75x
    # apart (docs/perf-notes.md, 2026-12-06). These say which host a run had.
    "iommu": MetadataKey(str, None, "'off' (no IOMMU groups), or 'on' and the kernel's iommu options"),
    "hypervisor": MetadataKey(bool, None, "the kernel runs under a hypervisor (cpuinfo's flag)"),
    # written by the sweep (hisparse/bench/host_sweep.py), on a kernel backend only
    "host_memory": MetadataKey(dict, None, "host pools: huge pages asked and got, NUMA nodes, each kind's arena"),
}

# Keys that must match for results to be merged into one run file (resume).
CHECKED_KEYS = ("machine", "gpu", "driver", "cuda_runtime", "torch", "git_commit")

# The host's description: `compare` warns when two runs differ in it. Not checked on resume: files
# written before 2026-12-06 lack "iommu" and "hypervisor" and hold the architecture in "cpu".
HOST_KEYS = ("cpu", "iommu", "hypervisor")


def records_host(environment: dict) -> bool:
    """Whether a run file describes its host: "iommu" marks a writer of 2026-12-06 or later."""
    return "iommu" in environment


def validate(environment: dict) -> list[str]:
    """Type problems of an environment dict (unknown keys are allowed: newer writers may add some)."""
    problems = []
    for key, spec in REGISTRY.items():
        value = environment.get(key)
        if value is not None and not isinstance(value, spec.type):
            problems.append(f"environment.{key}: expected {spec.type}, got {type(value).__name__} {value!r}")
    return problems


def mismatches(a: dict, b: dict, keys: tuple[str, ...] = CHECKED_KEYS) -> list[str]:
    """Human-readable differences of the checked keys between two environments."""
    return [f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_info(root: Path | None = None) -> tuple[str | None, bool | None]:
    """(HEAD commit, dirty flag) of the source checkout; (None, None) outside a git checkout.

    ``HISPARSE_GIT_COMMIT`` (and ``HISPARSE_GIT_DIRTY`` = 0/1), when set, win over git: whoever copied
    a tree to a GPU node knows which commit it is, while the copy may have no .git or a stale
    one (an older commit under a newer working tree: it would record
    the wrong commit and "dirty")."""
    given = env.git_commit_override()
    if given:
        return given, env.git_dirty_override()
    root = root or env.REPO_ROOT
    commit = git_or_none(root, "rev-parse", "HEAD", timeout=20) if root is not None else None
    if commit is None:
        return None, None
    status = git_or_none(root, "status", "--porcelain", "--untracked-files=no", timeout=20)
    return commit.strip(), (bool(status.strip()) if status is not None else None)


def machine_name() -> str:
    return env.machine() or socket.gethostname()


def _tvm_ffi_version() -> str | None:
    try:
        from importlib.metadata import version  # noqa: PLC0415

        return version("apache-tvm-ffi")
    except Exception:  # not installed: recorded as None
        return None


def _driver_version() -> str | None:
    try:
        import pynvml  # noqa: PLC0415

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # pynvml missing or NVML unusable: ask nvidia-smi
        pass
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0].strip() if out else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def host_description(root: Path = Path("/")) -> dict:
    """``cpu``, ``iommu`` and ``hypervisor`` of this host, read from /proc and /sys under ``root``.

    Each is None where the files are absent (not Linux, a sandbox); ``cpu`` then falls back to the
    architecture."""
    cpuinfo = _read(root / "proc" / "cpuinfo")
    model = flags = None
    for line in (cpuinfo or "").splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip() or None
        elif key == "flags" and flags is None:
            flags = value.split()
    iommu = None
    groups = root / "sys" / "kernel" / "iommu_groups"
    if (root / "sys" / "kernel").is_dir():
        on = groups.is_dir() and any(groups.iterdir())
        options = [t for t in (_read(root / "proc" / "cmdline") or "").split() if "iommu" in t]
        iommu = ("on" if on else "off") + (f" ({' '.join(options)})" if options else "")
    return {
        "cpu": model or platform.processor() or platform.machine() or None,
        "iommu": iommu,
        "hypervisor": None if flags is None else "hypervisor" in flags,
    }


def collect_environment(device: str = "cpu") -> dict:
    """Metadata of this process for a run on ``device`` ("cuda" or "cpu")."""
    import torch  # noqa: PLC0415


    commit, dirty = git_info()
    meta: dict = {
        "machine": machine_name(),
        "gpu": None,
        "gpu_count": 0,
        "compute_capability": None,
        "driver": None,
        "cuda_runtime": torch.version.cuda,
        "torch": torch.__version__,
        "tvm_ffi": _tvm_ffi_version(),
        "python": platform.python_version(),
        "git_commit": commit,
        "git_dirty": dirty,
        "hisparse": env.VERSION,
        "l2_bytes": None,
        "sm_count": None,
        **host_description(),
    }
    if device == "cuda" and torch.cuda.is_available():
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        meta.update(
            gpu=props.name,
            gpu_count=torch.cuda.device_count(),
            compute_capability=f"{props.major}.{props.minor}",
            driver=_driver_version(),
            l2_bytes=int(getattr(props, "L2_cache_size", 0)) or None,
            sm_count=int(props.multi_processor_count),
        )
    elif torch.cuda.is_available():
        meta["gpu_count"] = torch.cuda.device_count()
    return meta
