"""`hisparse-bench env [--json]`: what this machine looks like to hisparse — Python, torch and its CUDA
build, the GPU, the CUDA toolkit the JIT would use, the target arch, the JIT cache and the versions the
results depend on. Never fails and never changes device state: anything missing prints as
"none" / "not found" (null in --json).

The run metadata (``hisparse.results.metadata.collect_environment``) supplies the GPU and version fields; the
toolkit, arch and cache fields are ``hisparse.env``'s own values, so this shows exactly what a build
or run in this environment would use.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import click

from hisparse import env as hs_env  # `env` is this module's command (cli.py registers that name)

# Keys whose absence means a missing file or program ("not found") rather than a missing value ("none").
_PATH_KEYS = ("nvcc", "nvcc_on_path", "cuda_home")


def _safe(fn, default=None):
    try:
        return fn()
    except Exception:  # a diagnostic must print what it can: one broken probe is one "none"
        return default


def _version(dist: str) -> str | None:
    from importlib.metadata import version  # noqa: PLC0415

    return _safe(lambda: version(dist))


def _cuda_available() -> bool:
    import torch  # noqa: PLC0415

    return bool(torch.cuda.is_available())


def _environment(cuda: bool) -> dict:
    from hisparse.results import metadata  # noqa: PLC0415

    meta = None
    if cuda:  # a broken driver/runtime pairing can raise in the device query: fall back to the CPU view
        meta = _safe(lambda: metadata.collect_environment("cuda"))
    if meta is None:
        meta = _safe(lambda: metadata.collect_environment("cpu"))
    if meta is None:  # torch itself does not import
        meta = {"machine": _safe(metadata.machine_name), "tvm_ffi": _version("apache-tvm-ffi")}
    if meta.get("driver") is None:  # a GPU node whose torch cannot see the GPU still has a driver to report
        meta["driver"] = _safe(metadata._driver_version)
    return meta


def _arch_source(cuda: bool) -> str:
    if hs_env.cuda_arch_override():
        return "HISPARSE_CUDA_ARCH"
    return "GPU 0" if cuda else f"default {hs_env.DEFAULT_CUDA_ARCH} (no GPU visible)"


def _prebuilt_modules(tag: str | None) -> int:
    if tag is None:
        return 0
    return sum(1 for _ in (Path(hs_env.CACHE_DIR) / tag).glob("*/*.so"))


def collect() -> dict:
    """Everything `env` prints, keyed as in --json."""
    cuda = bool(_safe(_cuda_available, False))
    meta = _environment(cuda)
    arch = _safe(lambda: hs_env.CUDA_ARCH)
    tag = _safe(lambda: hs_env.arch_tag(arch)) if arch else None
    nvcc = _safe(lambda: hs_env.NVCC)
    home = _safe(lambda: hs_env.CUDA_HOME)
    return {
        "machine": meta.get("machine"),
        "python": meta.get("python") or sys.version.split()[0],
        "python_executable": sys.executable,
        "hisparse": meta.get("hisparse"),
        "git_commit": meta.get("git_commit"),
        "git_dirty": meta.get("git_dirty"),
        "torch": meta.get("torch"),
        "torch_cuda_build": meta.get("cuda_runtime"),  # None: a CPU-only build of torch
        "cuda_available": cuda,
        "gpu_count": meta.get("gpu_count", 0),
        "gpu": meta.get("gpu"),
        "compute_capability": meta.get("compute_capability"),
        "driver": meta.get("driver"),
        "cpu": meta.get("cpu"),
        "iommu": meta.get("iommu"),  # translations of host pages cost what the host makes them cost
        "hypervisor": meta.get("hypervisor"),
        "nvcc": str(nvcc) if nvcc else None,  # the real compiler (wrapper scripts resolved)
        "nvcc_on_path": shutil.which("nvcc"),
        "nvcc_version": _safe(lambda: hs_env.NVCC_VERSION) if nvcc else None,
        "cuda_home": str(home) if home else None,
        "cuda_arch": arch,
        "cuda_arch_tag": tag,  # None: HISPARSE_CUDA_ARCH is not a valid arch
        "cuda_arch_source": _arch_source(cuda),
        "jit_cache_dir": str(hs_env.CACHE_DIR),
        "jit_prebuilt_modules": _prebuilt_modules(tag),  # .so files in <cache>/<sm_XX>/
        "no_jit": bool(hs_env.NO_JIT),
        "tvm_ffi": meta.get("tvm_ffi"),
        "asv": _version("asv"),
        "asv_runner": _version("asv-runner"),
    }


def _text(key: str, value) -> str:
    if value is None:
        return "not found" if key in _PATH_KEYS else "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def render(info: dict) -> str:
    width = max(map(len, info))
    lines = [f"{k:<{width}}  {_text(k, v)}" for k, v in info.items()]
    if info.get("cuda_arch") and info.get("cuda_arch_tag") is None:
        lines.append(f"warning: cuda_arch {info['cuda_arch']!r} is not a valid arch (HISPARSE_CUDA_ARCH): "
                     "expected e.g. 9.0 or 9.0a")
    if info.get("no_jit") and info.get("cuda_arch_tag") and not info.get("jit_prebuilt_modules"):
        lines.append(f"warning: HISPARSE_NO_JIT=1 but no prebuilt kernel in "
                     f"{Path(info['jit_cache_dir']) / info['cuda_arch_tag']}: every CUDA case will be unavailable")
    return "\n".join(lines)


@click.command("env")
@click.option("--json", "as_json", is_flag=True, help="Print the same fields as one JSON object.")
def env_cmd(as_json: bool) -> None:
    """Print what was detected: Python, torch and its CUDA build, the GPU (name, compute capability,
    driver), nvcc and CUDA_HOME, the target arch, the JIT cache and HISPARSE_NO_JIT, the tvm-ffi and
    asv versions, the machine name. Works without a GPU or CUDA toolkit ("none" / "not found")."""
    info = collect()
    click.echo(json.dumps(info, indent=2) if as_json else render(info))


env = env_cmd  # the attribute hisparse/cli.py registers
