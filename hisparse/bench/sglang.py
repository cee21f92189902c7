"""sglang's own HiSparse kernels as implementations of the harness (issue 12).

Three rows of hisparse/bench/implementations.py run through sglang's Python entry points
(``sglang/kernels/ops/kvcache/hisparse.py``) on exactly the tensors our implementations get:

- ``sglang_lru_sequential``: ``load_cache_to_device_buffer_mla`` (the single-step exact-LRU swap),
  once per step on the strided views ``top_k_tokens[:, s]``, as ``lru_sequential``;
- ``sglang_multi_step``: ``load_cache_to_device_buffer_spec_mla`` with a ``HiSparseSpecState``;
- ``sglang_multi_step_planned``: the same recording its miss plan, then ``copy_cache_planned_mla``
  into each shared-index layer.

Where sglang comes from (``find_source``): a source tree or an unpacked wheel named by
``HISPARSE_SGLANG_SRC`` (hisparse/env.py) or ``--sglang-src``, else an installed ``sglang``. Either way
``import sglang`` is NOT run (its ``__init__`` pulls in the whole serving stack): the parent packages
are registered with a ``__path__`` into the tree and no ``__init__`` executed, and the two helpers the
kernel loader takes from ``sglang.srt.utils.common`` are provided here. The kernel modules then need
only torch, apache-tvm-ffi and msgspec. sglang JIT-builds its kernels on first call.

The multi-step state is built the way sglang's coordinator builds it
(``sglang/srt/managers/hisparse_coordinator.py``, ``HiSparseSpecSwapManager.__init__`` and ``reset()``),
one layer, one request slot per batch row. For the invariant checker, ``SglangStateView`` presents
sglang's packed state in our ``MultiStepState`` field names (docs/semantics.md §3: the two layouts
hold the same facts; the hash banks are bit-identical), so sglang's outputs go through the very same
``checked_call`` path (invariants + byte comparison of every returned row with its host row).

This module imports no torch at import time (the case model prunes with it on the CLI).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hisparse import env
from hisparse.errors import InputError, KernelUnavailable
from hisparse.gitutil import git_or_none

PINNED_VERSION = "0.5.23"
ENTRY_MODULE = "sglang.kernels.ops.kvcache.hisparse"
ENTRY_POINTS = ("load_cache_to_device_buffer_spec_mla", "HiSparseSpecState", "load_cache_to_device_buffer_mla",
                "copy_cache_planned_mla")
# Packages registered without running their __init__ (each one's __path__ points into the tree).
_BARE_PACKAGES = ("sglang", "sglang.kernels", "sglang.kernels.ops", "sglang.kernels.ops.kvcache", "sglang.srt",
                  "sglang.srt.utils")
INSTALL_HINT = (f"install sglang's kernels (pip install --no-deps sglang=={PINNED_VERSION} msgspec, or "
                "`hisparse-bench wheelhouse --with-sglang VERSION` offline) or point HISPARSE_SGLANG_SRC / "
                "--sglang-src at an sglang checkout or an unpacked wheel")

# Upstream contract (hisparse_coordinator.py HiSparseSpecSwapManager.__init__, hisparse_spec.cuh
# static_asserts, hisparse.py): the multi-step swap takes 2-4 steps, top_k >= 1024, steps*top_k <= 8192,
# hot_buffer_size <= 32768 (15 cursor bits) and no more request slots than hot slots; the single-step
# swap needs hot_buffer_size >= top_k and keeps int16 lru_slots.
SPEC_MIN_STEPS, SPEC_MAX_STEPS = 2, 4
SPEC_MIN_TOP_K = 1024
SPEC_MAX_OCCURRENCES = 8192
SPEC_MAX_HOT_BUFFER_SIZE = 32768
MIN_SCRATCH_CAPACITY = 1024  # HiSparseSpecSwapManager.MIN_SCRATCH_CAPACITY
NUM_METADATA_VALUES_PER_OCCURRENCE = 5
NUM_COUNTERS_PER_REQUEST = 4
HASH_MULTIPLIER = 2654435761
HASH_DEGRADED_FLAG = 1 << 31  # hisparse_spec.cuh: bit 31 of the scratch generation counter


class SglangUnavailable(KernelUnavailable):
    """sglang's kernels cannot be found or imported here; the message says what to install or set."""


# ---------------------------------------------------------------------------------------------
# Where sglang comes from


@dataclass(frozen=True)
class SglangSource:
    """One sglang the harness can load: ``package_dir`` is the ``sglang`` package directory."""

    kind: str  # "tree" (HISPARSE_SGLANG_SRC / --sglang-src) | "installed"
    package_dir: Path
    version: str | None
    git_commit: str | None = None
    git_dirty: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.package_dir), "version": self.version,
                "git_commit": self.git_commit, "git_dirty": self.git_dirty}


def _package_dir(root: Path) -> Path | None:
    """The ``sglang`` package under ``root``: a checkout (python/sglang), an unpacked wheel (sglang/),
    or the package directory itself."""
    for cand in (root / "python" / "sglang", root / "sglang", root):
        if (cand / "kernels" / "ops" / "kvcache" / "hisparse.py").is_file():
            return cand
    return None


def _tree_version(pkg: Path) -> str | None:
    """Version of a tree: an unpacked wheel's dist-info, else a built checkout's _version.py."""
    for info in sorted(pkg.parent.glob("sglang-*.dist-info")):
        for line in (info / "METADATA").read_text(errors="replace").splitlines() if (info / "METADATA").is_file() else ():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    version_file = pkg / "_version.py"
    if version_file.is_file():
        for line in version_file.read_text(errors="replace").splitlines():
            if line.replace(" ", "").startswith("__version__=") or line.startswith("version ="):
                return line.split("=", 1)[1].strip().strip("'\"")
    return None


def _git(pkg: Path, *args: str) -> str | None:
    return git_or_none(pkg, *args, timeout=20)


def find_source(src: str | Path | None = None) -> SglangSource:
    """The sglang to load: ``src``, else ``env.SGLANG_SRC`` (HISPARSE_SGLANG_SRC), else an installed one.

    Raises SglangUnavailable naming what to install or set."""
    src = src if src is not None else getattr(env, "SGLANG_SRC", None)
    if src:
        root = Path(src).expanduser()
        pkg = _package_dir(root)
        if pkg is None:
            raise SglangUnavailable(f"HISPARSE_SGLANG_SRC / --sglang-src: {str(root)!r} holds no sglang package with "
                                    "kernels/ops/kvcache/hisparse.py (expected an sglang checkout, an unpacked wheel, "
                                    "or the sglang package directory)")
        # Only a tree whose entry module git tracks is a checkout: a wheel unpacked inside some other
        # repository (an ignored folder of ours, say) must not record that repository's commit.
        tracked = _git(pkg, "ls-files", "--error-unmatch", "kernels/ops/kvcache/hisparse.py") is not None
        commit = _git(pkg, "rev-parse", "HEAD") if tracked else None
        dirty = None
        if commit is not None:
            status = _git(pkg, "status", "--porcelain", "--untracked-files=no")
            dirty = bool(status and status.strip())
        return SglangSource("tree", pkg.resolve(), _tree_version(pkg), commit.strip() if commit else None, dirty)
    spec = importlib.util.find_spec("sglang") if "sglang" not in sys.modules else None
    if spec is None and "sglang" in sys.modules:
        path = getattr(sys.modules["sglang"], "__path__", None)
        spec_dirs = list(path or [])
    else:
        spec_dirs = list(spec.submodule_search_locations or []) if spec is not None else []
    for d in spec_dirs:
        pkg = _package_dir(Path(d))
        if pkg is not None:
            try:
                version = importlib.metadata.version("sglang")
            except importlib.metadata.PackageNotFoundError:
                version = _tree_version(pkg)
            return SglangSource("installed", pkg.resolve(), version)
    if spec_dirs:
        raise SglangUnavailable(f"the installed sglang ({spec_dirs[0]}) has no kernels/ops/kvcache/hisparse.py "
                                f"(HiSparse kernels ship from sglang {PINNED_VERSION}); {INSTALL_HINT}")
    raise SglangUnavailable(f"sglang is not available: {INSTALL_HINT}")



# ---------------------------------------------------------------------------------------------
# Loading the entry points without the serving stack


@dataclass(frozen=True)
class SglangKernels:
    """sglang's HiSparse entry points, loaded from ``source``."""

    source: SglangSource
    spec_swap: Any  # load_cache_to_device_buffer_spec_mla
    spec_state: Any  # HiSparseSpecState
    lru_swap: Any  # load_cache_to_device_buffer_mla
    copy_planned: Any  # copy_cache_planned_mla
    module: Any


_LOADED: dict[str, SglangKernels] = {}


def _cuda_version() -> tuple[int, int]:
    import torch  # noqa: PLC0415

    text = torch.version.cuda or "0.0"
    major, _, minor = text.partition(".")
    return int(major), int((minor.split(".") or ["0"])[0] or 0)


def _common_shim() -> types.ModuleType:
    """``sglang.srt.utils.common`` as the kernel loader uses it (is_cuda, get_cuda_version): the real
    module imports the serving stack."""
    mod = types.ModuleType("sglang.srt.utils.common")

    def is_cuda() -> bool:
        import torch  # noqa: PLC0415

        return torch.version.cuda is not None

    mod.is_cuda = is_cuda
    mod.get_cuda_version = _cuda_version
    return mod


def _register_bare_packages(pkg: Path) -> None:
    """Register the parent packages with ``__path__`` into ``pkg`` and no ``__init__`` run."""
    for name in _BARE_PACKAGES:
        existing = sys.modules.get(name)
        sub = Path(*name.split(".")[1:]) if "." in name else Path()
        path = str(pkg / sub)
        if existing is not None:
            if path not in list(getattr(existing, "__path__", [])):
                raise SglangUnavailable(f"another sglang is already imported in this process ({name} from "
                                        f"{list(getattr(existing, '__path__', []))}); cannot also load {pkg}")
            continue
        mod = types.ModuleType(name)
        mod.__path__ = [path]
        mod.__package__ = name
        mod.__file__ = None
        sys.modules[name] = mod
    sys.modules.setdefault("sglang.srt.utils.common", _common_shim())


def _export_cuda_home() -> None:
    """sglang's JIT (tvm-ffi's build) links against CUDA_HOME, else dirname(dirname(which nvcc)): a
    wrapper script on PATH (/usr/local/bin/nvcc) then gives a toolkit without lib64 and the link fails
    (-lcudart not found). Hand it the toolkit our own JIT resolved, unless the user set one."""
    import os  # noqa: PLC0415

    if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        return
    home = env.CUDA_HOME
    if home is not None:
        os.environ["CUDA_HOME"] = str(home)


def load(src: str | Path | None = None) -> SglangKernels:
    """sglang's entry points (cached per package directory); raises SglangUnavailable with what to do."""
    source = find_source(src)
    key = str(source.package_dir)
    if key in _LOADED:
        return _LOADED[key]
    _export_cuda_home()
    real = sys.modules.get("sglang")
    if real is None or getattr(real, "__file__", None) is None:  # not a fully imported sglang
        _register_bare_packages(source.package_dir)
    try:
        module = importlib.import_module(ENTRY_MODULE)
    except ImportError as e:
        missing = getattr(e, "name", None) or str(e)
        hint = "pip install msgspec" if "msgspec" in str(missing) else (
            "pip install apache-tvm-ffi" if "tvm_ffi" in str(missing) else INSTALL_HINT)
        raise SglangUnavailable(f"sglang from {source.package_dir}: importing {ENTRY_MODULE} failed "
                                f"({type(e).__name__}: {e}); {hint}") from e
    except Exception as e:  # noqa: BLE001 (a broken tree: syntax error, changed API at import)
        raise SglangUnavailable(f"sglang from {source.package_dir}: importing {ENTRY_MODULE} failed "
                                f"({type(e).__name__}: {e}); is the tree complete?") from e
    absent = [n for n in ENTRY_POINTS if not hasattr(module, n)]
    if absent:
        raise SglangUnavailable(f"sglang from {source.package_dir} ({source.version}): {ENTRY_MODULE} lacks "
                                f"{', '.join(absent)} (HiSparse entry points of sglang {PINNED_VERSION})")
    kernels = SglangKernels(source, module.load_cache_to_device_buffer_spec_mla, module.HiSparseSpecState,
                            module.load_cache_to_device_buffer_mla, module.copy_cache_planned_mla, module)
    _LOADED[key] = kernels
    return kernels


def unavailable_reason(src: str | Path | None = None, *, backend: Any = None) -> str | None:
    """Why sglang's kernels cannot run here (for a clean skip), or None. ``backend``: they are CUDA
    kernels, so a non-kernel (reference) backend skips them too."""
    if backend is not None and not getattr(backend, "is_kernel", False):
        return (f"sglang's kernels run on the cuda backend only (backend {getattr(backend, 'name', backend)!r} "
                "runs our PyTorch references)")
    try:
        load(src)
    except SglangUnavailable as e:
        return str(e)
    return None


def provenance(src: str | Path | None = None) -> dict[str, Any]:
    """What a run file records about sglang: ``{"sglang": {kind, path, version, git_commit, git_dirty}}``
    or ``{"sglang": None, "sglang_unavailable": reason}``. Cheap: finds the source, imports nothing."""
    try:
        return {"sglang": find_source(src).to_dict()}
    except SglangUnavailable as e:
        return {"sglang": None, "sglang_unavailable": str(e)}


# ---------------------------------------------------------------------------------------------
# Upstream's contract (prune reasons)


def prune_reason(impl: str, params: dict) -> str | None:
    """Why upstream's entry points would refuse the case (their checks, read from their source)."""
    s, k, h, bs = (int(params[x]) for x in ("steps", "top_k", "hot_buffer_size", "batch"))
    if impl == "sglang_lru_sequential":
        return None if h >= k else f"{impl}: upstream needs hot_buffer_size >= top_k, got {h} < {k}"
    if params.get("pdl") is False:
        return (f"{impl}: sglang decides PDL itself (is_arch_support_pdl(): on from sm90), so pdl=false "
                "does not apply")
    if not SPEC_MIN_STEPS <= s <= SPEC_MAX_STEPS:
        return f"{impl}: upstream's speculative swap requires {SPEC_MIN_STEPS}-{SPEC_MAX_STEPS} steps, got {s}"
    if k < SPEC_MIN_TOP_K:
        return f"{impl}: upstream's speculative swap requires top_k >= {SPEC_MIN_TOP_K}, got {k}"
    if s * k > SPEC_MAX_OCCURRENCES:
        return f"{impl}: upstream's speculative swap supports at most {SPEC_MAX_OCCURRENCES} occurrences, got {s}*{k}"
    if h > SPEC_MAX_HOT_BUFFER_SIZE:
        return f"{impl}: upstream's CLOCK cursor needs hot_buffer_size <= {SPEC_MAX_HOT_BUFFER_SIZE}, got {h}"
    if bs > h:
        return f"{impl}: upstream needs request slots (batch {bs}) <= hot_buffer_size {h}"
    return None


# ---------------------------------------------------------------------------------------------
# The state, the coordinator's way


@dataclass(frozen=True)
class SpecSizes:
    num_req_slots: int
    steps: int
    top_k: int
    hot_buffer_size: int
    scratch_capacity: int
    hash_size: int
    metadata_width: int


def spec_sizes(num_req_slots: int, steps: int, top_k: int, hot_buffer_size: int) -> SpecSizes:
    """HiSparseSpecSwapManager.__init__'s sizing (one layer, ``num_req_slots`` request slots)."""
    t = steps * top_k
    scratch = min(t, max(MIN_SCRATCH_CAPACITY, t - hot_buffer_size))
    hash_size = 1 << max(1, (2 * hot_buffer_size - 1).bit_length())
    width = max(NUM_COUNTERS_PER_REQUEST * num_req_slots, NUM_METADATA_VALUES_PER_OCCURRENCE * t)
    return SpecSizes(num_req_slots, steps, top_k, hot_buffer_size, scratch, hash_size, width)


def new_spec_state(state_cls: Any, sizes: SpecSizes, scratch_locs: Any) -> Any:
    """A ``HiSparseSpecState`` as the coordinator allocates it, with every request slot ``reset()``
    (identity entries of tokens 0..HOT-1 in bank 0, CLOCK and counters zero, metadata -1) and
    ``scratch_locs`` [R, C] int32 as ``allocate_scratch`` gives them."""
    import torch  # noqa: PLC0415

    r, hot, dev = sizes.num_req_slots, sizes.hot_buffer_size, scratch_locs.device
    if tuple(scratch_locs.shape) != (r, sizes.scratch_capacity):
        raise InputError(f"scratch_locs: expected [{r}, {sizes.scratch_capacity}] (coordinator sizing), "
                                f"got {list(scratch_locs.shape)}")
    cache_index = torch.full((r, 2, sizes.hash_size), -1, dtype=torch.int64, device=dev)
    cache_policy = torch.zeros((r + 1, hot), dtype=torch.int32, device=dev)
    scratch_state = torch.full((r + 1, sizes.metadata_width), -1, dtype=torch.int32, device=dev)
    scratch_state[0].zero_()
    tokens = torch.arange(hot, dtype=torch.int64, device=dev)
    hash_slots = (tokens * HASH_MULTIPLIER) & (sizes.hash_size - 1)
    cache_index[:, 0, hash_slots] = ((tokens << 32) | tokens).view(1, -1)  # reset(): every slot at once
    return state_cls(cache_index=cache_index, cache_policy=cache_policy,
                     scratch_locs=scratch_locs.to(torch.int32).contiguous().clone(), scratch_state=scratch_state)


def _cursor_bits(hot: int) -> int:
    return max(0, (hot - 1).bit_length())


class SglangStateView:
    """sglang's ``HiSparseSpecState`` read in our ``MultiStepState`` field names, for the snapshot and
    the invariant checker (read-only; every attribute decodes the current device values).

    hash_index = cache_index; ref_epochs = cache_policy[1:]; clock = [epoch, cursor] unpacked from
    cache_policy[0] (epoch above ceil(log2 HOT) cursor bits); counters = [last misses, work, union hits,
    flags] from the strided counter row scratch_state[0, c*R + r] (flags bit 0: bit 31 of the scratch
    generation, hash degraded); scratch_locs as they are."""

    def __init__(self, state: Any, sizes: Any) -> None:
        self.sglang_state, self.sizes = state, sizes

    @property
    def hash_index(self) -> Any:
        return self.sglang_state.cache_index

    @property
    def ref_epochs(self) -> Any:
        r = self.sizes.num_req_slots
        return self.sglang_state.cache_policy[1:1 + r, :self.sizes.hot_buffer_size]

    @property
    def clock(self) -> Any:
        import torch  # noqa: PLC0415

        r, bits = self.sizes.num_req_slots, _cursor_bits(self.sizes.hot_buffer_size)
        packed = self.sglang_state.cache_policy[0, :r].to(torch.int64) & 0xFFFFFFFF
        return torch.stack([packed >> bits, (packed & ((1 << bits) - 1)) % self.sizes.hot_buffer_size],
                           dim=1).to(torch.int32)

    @property
    def counters(self) -> Any:
        import torch  # noqa: PLC0415

        r = self.sizes.num_req_slots
        row = self.sglang_state.scratch_state[0, :NUM_COUNTERS_PER_REQUEST * r].to(torch.int64).view(
            NUM_COUNTERS_PER_REQUEST, r)
        degraded = ((row[3] & 0xFFFFFFFF) & HASH_DEGRADED_FLAG) != 0
        return torch.stack([row[0], row[1], row[2], degraded.to(torch.int64)], dim=1).to(torch.int32)

    @property
    def scratch_locs(self) -> Any:
        return self.sglang_state.scratch_locs

    def tensors(self) -> dict[str, Any]:
        return dict(self.sglang_state._asdict())


# ---------------------------------------------------------------------------------------------
# Binders (registered in hisparse/bench/calls.py _BINDERS)


def _kernels_for(backend: Any) -> SglangKernels:
    if not getattr(backend, "is_kernel", False):
        raise SglangUnavailable("sglang's kernels run on the cuda backend only (they are CUDA kernels)")
    return load()


def _sglang_state(workload: Any, kernels: SglangKernels) -> SglangStateView:
    """One sglang state per workload (both call variants share it), restored by ``workload.reset()``."""
    view = getattr(workload, "sglang_state_view", None)
    if view is not None:
        return view
    b = workload.buffers
    ours = b.state.sizes  # the workload sized scratch rows the same way (min(T, max(1024, T - HOT)))
    sizes = spec_sizes(b.batch, b.steps, b.top_k, b.hot_buffer_size)
    if sizes.scratch_capacity != ours.scratch_capacity:
        raise InputError(f"scratch capacity: coordinator sizing gives {sizes.scratch_capacity}, the "
                                f"workload's rows {ours.scratch_capacity}")
    state = new_spec_state(kernels.spec_state, sizes, b.state.scratch_locs)
    view = SglangStateView(state, _checker_sizes(sizes, ours))
    workload.sglang_state_view = view
    # Workload.reset() restores these pairs (hisparse/bench/workload.py); every replay starts here.
    workload._restore.extend((t, t.clone()) for t in state)
    return view


def _checker_sizes(sizes: SpecSizes, ours: Any) -> Any:
    from dataclasses import replace  # noqa: PLC0415

    return replace(ours, hash_size=sizes.hash_size)


def _spec_fn(fn: Any, kwargs: dict[str, Any]) -> Any:
    """A callable of the Invocation protocol (called with our kwargs) that calls sglang's entry point
    with its own, prebuilt once."""

    def call(**_: Any) -> None:
        fn(**kwargs)

    call.sglang_kwargs = kwargs  # type: ignore[attr-defined]  (tests read what sglang gets)
    # The gate for sglang's kernels is the invariant checker and the row bytes; the extra bit-exact
    # comparison with our single-step reference (calls._bit_exact_setup) is a promise of our kernel only.
    call.reference_exact = False  # type: ignore[attr-defined]
    return call


def spec_kwargs(b: Any, state: Any, *, record_plan: bool) -> dict[str, Any]:
    """``load_cache_to_device_buffer_spec_mla``'s keyword arguments on our workload's tensors."""
    kw = dict(top_k_tokens=b.top_k_tokens, device_buffer_tokens=b.device_buffer_tokens,
              host_cache_locs=b.host_cache_locs, device_buffer_locs=b.device_buffer_locs, host_cache=b.host_cache,
              device_buffer=b.device_buffer, top_k_device_locs=b.top_k_device_locs,
              req_pool_indices=b.req_pool_indices, seq_lens=b.seq_lens, state=state, num_real_reqs=b.num_real_reqs)
    if record_plan:
        kw.update(miss_src=b.miss_src, miss_dst=b.miss_dst, miss_count=b.miss_count)
    return kw


# The block size production launches the single-step swap with: HiSparseCoordinator's
# swap_in_block_size (sglang/srt/managers/hisparse_coordinator.py, 0.5.23). The entry point's own
# default (256) wrote shared memory out of bounds at top-k 2048 / hot 4096 on the H200 (2026-12-01,
# compute-sanitizer: "Invalid __shared__ write of size 2 bytes" in load_cache_to_device_buffer_kernel).
COORDINATOR_SWAP_IN_BLOCK_SIZE = 960


def lru_kwargs(b: Any, step: int, *, record_plan: bool) -> dict[str, Any]:
    """``load_cache_to_device_buffer_mla``'s keyword arguments for one step (strided [bs, K] views),
    with the coordinator's block size."""
    kw = dict(top_k_tokens=b.top_k_tokens[:, step], device_buffer_tokens=b.device_buffer_tokens,
              host_cache_locs=b.host_cache_locs, device_buffer_locs=b.device_buffer_locs, host_cache=b.host_cache,
              device_buffer=b.device_buffer, top_k_device_locs=b.top_k_device_locs[:, step],
              req_pool_indices=b.req_pool_indices, seq_lens=b.step_seq_lens[step], lru_slots=b.lru_slots,
              item_size_bytes=b.item_size_bytes, num_top_k=b.top_k, hot_buffer_size=b.hot_buffer_size,
              page_size=b.page_size, block_size=COORDINATOR_SWAP_IN_BLOCK_SIZE, num_real_reqs=b.num_real_reqs)
    if record_plan:
        kw.update(miss_src=b.miss_src, miss_dst=b.miss_dst, miss_count=b.miss_count)
    return kw


def copy_kwargs(b: Any, layer: int) -> dict[str, Any]:
    """``copy_cache_planned_mla``'s keyword arguments: our names are sglang's."""
    return dict(b.copy_planned_kwargs(layer))


# Kinds of hisparse/bench/calls.py's Invocation (calls.SINGLE, MULTI, PLANNED): calls.py wraps these
# tuples (kind, fn, kwargs, label) so that this module never imports it.
SINGLE, MULTI, PLANNED = "single", "multi", "planned"


def _planned_copies(kernels: SglangKernels, b: Any, prefix: str) -> list[tuple]:
    return [(PLANNED, _spec_fn(kernels.copy_planned, copy_kwargs(b, layer)), b.copy_planned_kwargs(layer),
             f"{prefix}shared layer {layer}") for layer in range(1, len(b.shared_layer_buffers) + 1)]


def lru_invocations(backend: Any, workload: Any, *, planned: bool, record_plan: bool) -> list[tuple]:
    """``load_cache_to_device_buffer_mla`` once per step; the kwargs the checker reads are ours (the
    same tensors)."""
    kernels, b = _kernels_for(backend), workload.buffers
    plan = record_plan or planned
    out: list[tuple] = []
    for s in range(b.steps):
        out.append((SINGLE, _spec_fn(kernels.lru_swap, lru_kwargs(b, s, record_plan=plan)),
                    b.single_step_kwargs(s, record_plan=plan), f"step {s}"))
        if planned:
            out += _planned_copies(kernels, b, f"step {s} ")
    return out


def multi_step_invocations(backend: Any, workload: Any, *, planned: bool, record_plan: bool) -> list[tuple]:
    """One speculative swap over all steps (sglang decides PDL itself: ``is_arch_support_pdl()``);
    with shared layers, its plan replayed by ``copy_cache_planned_mla`` into each. The checker reads
    our kwargs with ``state`` = the ``SglangStateView`` of sglang's state."""
    kernels, b = _kernels_for(backend), workload.buffers
    view = _sglang_state(workload, kernels)
    plan = record_plan or planned
    ours = dict(b.multi_step_kwargs(record_plan=plan), state=view)
    ours.pop("pdl", None)
    out: list[tuple] = [(MULTI, _spec_fn(kernels.spec_swap, spec_kwargs(b, view.sglang_state, record_plan=plan)),
                         ours, "sglang speculative swap")]
    if planned:
        out += _planned_copies(kernels, b, "")
    return out


__all__ = ["ENTRY_POINTS", "INSTALL_HINT", "PINNED_VERSION", "SglangKernels", "SglangSource", "SglangStateView",
           "SglangUnavailable", "find_source", "load", "lru_invocations", "multi_step_invocations", "new_spec_state",
           "prune_reason", "provenance", "spec_sizes", "unavailable_reason"]

