"""JIT build and load of kernel instantiations through tvm-ffi (``tvm_ffi.cpp.build_inline``).

One instantiation = one immutable :class:`KernelSpec` (op header, C++ entry template, ordered template
arguments). Its lifecycle is flashinfer's ``try_load -> lock -> build -> load``:

- the artefact is named after its content: ``CACHE_DIR/<sm_XX>/<module_name>/<module_name>.so`` where
  ``module_name`` = readable op/entry/template-args + a hash over the generated source, every header it
  reaches, the flags, the arch and the tvm-ffi version (tvm-ffi's own hash covers neither the arch nor
  CUDA_HOME, so we keep one cache per arch and pass ``build_directory`` ourselves);
- an existing build (``.so`` + stamp) is loaded without running ninja or nvcc;
- a per-module file lock makes concurrent processes (tensor-parallel ranks, parallel builds) compile once;
- ``HISPARSE_NO_JIT=1`` never compiles: an offline GPU node loads .so files prebuilt elsewhere
  (``hisparse-bench build`` + copy ``CACHE_DIR/<sm_XX>``) or gets :class:`KernelUnavailable`.

Compile-only works without a GPU (``build``); ``load`` needs one and raises ``KernelUnavailable``
otherwise. Compiler failures raise :class:`BuildError` carrying nvcc's full output.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from hisparse import env
from hisparse.errors import BuildError, KernelUnavailable
from hisparse.files import write_atomic

TemplateValue = Union[int, bool, str]

# Bump when the generated source or the build layout changes in a way the hash would not see.
_FORMAT_VERSION = "1"
# -O3 over tvm-ffi's default -O2 (the last -O wins in nvcc); -lineinfo keeps source lines for
# compute-sanitizer and Nsight at no runtime cost.
CUDA_CFLAGS = ("-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo")
EXPORTED_FUNCTION = "run"
_STAMP = "hisparse_build.json"
_LOCK = "hisparse.lock"  # not tvm-ffi's "lock": build_inline takes that one itself

_IDENT = re.compile(r"[A-Za-z_]\w*")
_QUALIFIED = re.compile(r"(::)?[A-Za-z_]\w*(::[A-Za-z_]\w*)*")
_CPP_TOKEN = re.compile(r"(::)?[A-Za-z_]\w*(::[A-Za-z_]\w*)*|-?\d+[uUlL]*")
_INCLUDE = re.compile(r"""^\s*#\s*include\s*[<"]([^>"]+)[>"]""", re.M)


@dataclass(frozen=True)
class KernelSpec:
    """One kernel instantiation: ``<source_dir>/<op>.cuh`` exporting ``run = <entry><template_args>``."""

    op: str  # source header <source_dir>/<op>.cuh, e.g. "swap_single"
    entry: str  # C++ function template, e.g. "hisparse::swap_single_entry"
    template_args: tuple[tuple[str, TemplateValue], ...] = ()  # ordered (name, value)
    source_dir: Path | None = field(default=None, compare=True)  # None: env.CSRC_DIR at build time

    def __post_init__(self) -> None:
        if not _IDENT.fullmatch(self.op):
            raise ValueError(f"KernelSpec.op must be an identifier (the header <op>.cuh), got {self.op!r}")
        if not _QUALIFIED.fullmatch(self.entry):
            raise ValueError(f"KernelSpec.entry must be a qualified C++ name, got {self.entry!r}")
        args = self.template_args
        items = list(args.items()) if isinstance(args, Mapping) else list(args)
        norm = []
        for item in items:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ValueError(f"KernelSpec.template_args items must be (name, value) pairs, got {item!r}")
            name, value = item
            if not (isinstance(name, str) and _IDENT.fullmatch(name)):
                raise ValueError(f"template argument name must be an identifier, got {name!r}")
            if not isinstance(value, (bool, int, str)):
                raise ValueError(f"template argument {name}={value!r}: value must be int, bool or str")
            if isinstance(value, str) and not _CPP_TOKEN.fullmatch(value):
                raise ValueError(f"template argument {name}={value!r}: str values must be a C++ name or literal")
            norm.append((name, value))
        if len({n for n, _ in norm}) != len(norm):
            raise ValueError(f"duplicate template argument names in {norm!r}")
        object.__setattr__(self, "template_args", tuple(norm))
        if self.source_dir is not None:
            object.__setattr__(self, "source_dir", Path(self.source_dir))

    # -- names --------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """Readable and unique per (op, entry, template args): ``hisparse_swap_single__top_k2048_...``."""
        short = self.entry.rsplit("::", 1)[-1]
        short = short[: -len("_entry")] if short.endswith("_entry") else short
        if short in ("", self.op):
            base = f"hisparse_{self.op}"
        elif short.startswith(self.op + "_"):
            base = f"hisparse_{short}"
        else:
            base = f"hisparse_{self.op}_{short}"
        if self.template_args:
            base += "__" + "_".join(f"{n}{_name_value(v)}" for n, v in self.template_args)
        return base[:150]  # file-name limit; the hash in module_name() keeps truncated names unique

    def cpp_function(self) -> str:
        """``hisparse::swap_single_entry<2048, 4096, true>``."""
        if not self.template_args:
            return self.entry
        return f"{self.entry}<{', '.join(_cpp_value(v) for _, v in self.template_args)}>"

    def source(self) -> str:
        """The generated translation unit (tvm-ffi prepends its own includes)."""
        args = ", ".join(f"{n}={_cpp_value(v)}" for n, v in self.template_args)
        return (
            f"// generated by hisparse.kernels.jit: {self.op} {self.entry} {args}\n"
            f'#include "{self.op}.cuh"\n'
            # parenthesised so the commas of the template argument list survive the macro
            f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({EXPORTED_FUNCTION}, ({self.cpp_function()}));\n"
        )

    def module_name(self, arch: str | None = None) -> str:
        """Cache key: ``name`` + hash(source, headers, flags, arch, tvm-ffi version)."""
        return f"{self.name}_{self._digest(arch)[:10]}"

    def build_dir(self, arch: str | None = None) -> Path:
        arch = arch or env.CUDA_ARCH
        return Path(env.CACHE_DIR) / env.arch_tag(arch) / self.module_name(arch)

    def library_path(self, arch: str | None = None) -> Path:
        return self.build_dir(arch) / f"{self.module_name(arch)}.so"

    # -- sources ------------------------------------------------------------------------------
    def header(self) -> Path:
        return self._source_dir() / f"{self.op}.cuh"

    def include_dirs(self) -> list[Path]:
        csrc = Path(env.CSRC_DIR)
        dirs = [self._source_dir(), csrc, csrc / "include", csrc / "host"]
        out: list[Path] = []
        for d in dirs:
            d = d.resolve()
            if d not in out:
                out.append(d)
        return out

    def dependencies(self) -> list[Path]:
        """The op header and every header it includes (transitively) from our include dirs."""
        root = self.header()
        if not root.is_file():
            raise KernelUnavailable(
                f"kernel source {root} not found (op {self.op!r}, source dir {self._source_dir()})")
        inc = self.include_dirs()
        seen: dict[Path, None] = {}
        todo = [root.resolve()]
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen[path] = None
            for name in _INCLUDE.findall(path.read_text(errors="replace")):
                for d in (path.parent, *inc):
                    cand = (d / name).resolve()
                    if cand.is_file():
                        todo.append(cand)
                        break  # not found anywhere: a system/CUDA/tvm-ffi header (covered by versions)
        return list(seen)

    def _source_dir(self) -> Path:
        return Path(self.source_dir if self.source_dir is not None else env.CSRC_DIR)

    def _digest(self, arch: str | None) -> str:
        import tvm_ffi  # noqa: PLC0415

        arch = arch or env.CUDA_ARCH
        h = hashlib.sha256()
        for part in (_FORMAT_VERSION, self.source(), env.arch_tag(arch), tvm_ffi.__version__, *CUDA_CFLAGS):
            h.update(part.encode())
            h.update(b"\0")
        src = self._source_dir().resolve()
        for dep in sorted(self.dependencies(), key=lambda p: _rel(p, src)):
            h.update(_rel(dep, src).encode())
            h.update(b"\0")
            h.update(dep.read_bytes())
            h.update(b"\0")
        return h.hexdigest()


def _rel(path: Path, src: Path) -> str:
    # Hash include-relative names, not absolute paths: a checkout elsewhere (another worktree, the
    # installed wheel, the GPU node) with the same sources gets the same key, so prebuilt caches travel.
    for base in (src, Path(env.CSRC_DIR).resolve()):
        try:
            return path.relative_to(base).as_posix()
        except ValueError:
            pass
    return path.name


def _cpp_value(v: TemplateValue) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _name_value(v: TemplateValue) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v) if v >= 0 else f"m{-v}"
    return re.sub(r"\W+", "_", v).strip("_")


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BuildReport:
    spec: KernelSpec
    module_name: str
    arch: str
    path: Path  # the .so (expected location when the build failed)
    seconds: float  # wall time of this call (compile, or lock wait + stamp check when cached)
    cached: bool
    error: BuildError | None = None  # only from build_many(..., keep_going=True)

    @property
    def ok(self) -> bool:
        return self.error is None


def build(spec: KernelSpec, *, arch: str | None = None) -> BuildReport:
    """Compile ``spec`` for ``arch`` (default env.CUDA_ARCH) unless a finished build exists. No GPU needed."""
    arch = arch or env.CUDA_ARCH
    t0 = time.perf_counter()
    name = spec.module_name(arch)
    bdir = spec.build_dir(arch)
    so = bdir / f"{name}.so"
    if _is_built(bdir, so):
        return BuildReport(spec, name, arch, so, time.perf_counter() - t0, True)
    if env.NO_JIT:
        raise KernelUnavailable(
            f"HISPARSE_NO_JIT=1 and no prebuilt kernel {name} in {Path(env.CACHE_DIR) / env.arch_tag(arch)}: "
            f"build it on a machine with nvcc (`hisparse-bench build --arch {arch}`) and copy that cache "
            "directory here (or point HISPARSE_CACHE_DIR at it)")
    from tvm_ffi.utils import FileLock  # noqa: PLC0415

    bdir.mkdir(parents=True, exist_ok=True)
    with _thread_lock(str(bdir)), FileLock(str(bdir / _LOCK)):
        if _is_built(bdir, so):  # another process or thread finished it while we waited
            return BuildReport(spec, name, arch, so, time.perf_counter() - t0, True)
        _compile(spec, name, bdir, arch)
        if not so.is_file():
            raise BuildError(f"building {name}: ninja succeeded but {so} is missing")
        _write_stamp(bdir, spec, name, arch)
    return BuildReport(spec, name, arch, so, time.perf_counter() - t0, False)


def build_many(specs: Iterable[KernelSpec], *, jobs: int | None = None, arch: str | None = None,
               keep_going: bool = False) -> list[BuildReport]:
    """Build distinct specs in parallel threads (each build is an nvcc subprocess), in input order.

    keep_going=False raises the first BuildError once all builds have finished; True returns failed builds
    as reports with ``error`` set.
    """
    arch = arch or env.CUDA_ARCH
    unique = list(dict.fromkeys(specs))
    jobs = max(1, jobs or os.cpu_count() or 1)

    def one(spec: KernelSpec) -> BuildReport:
        t0 = time.perf_counter()
        try:
            return build(spec, arch=arch)
        except BuildError as e:
            if not keep_going:
                raise
            return BuildReport(spec, spec.module_name(arch), arch, spec.library_path(arch),
                               time.perf_counter() - t0, False, e)

    with ThreadPoolExecutor(max_workers=min(jobs, max(1, len(unique)))) as pool:
        futures = [pool.submit(one, s) for s in unique]
        errors = [f.exception() for f in futures]
    for err in errors:
        if err is not None:
            raise err
    return [f.result() for f in futures]


_LOADED: dict[tuple[KernelSpec, str], Any] = {}
_LOADED_LOCK = threading.Lock()


def load(spec: KernelSpec) -> Any:
    """The tvm-ffi Module of ``spec`` (exported function ``run``), built if needed; memoised per process.

    Raises KernelUnavailable without a CUDA GPU (before any compile), BuildError if nvcc fails.
    """
    arch = env.CUDA_ARCH
    key = (spec, arch)
    mod = _LOADED.get(key)
    if mod is not None:
        return mod
    if not cuda_available():
        raise KernelUnavailable(
            f"kernel {spec.name} needs a CUDA GPU and none is visible (torch.cuda.is_available() is False); "
            "use the PyTorch reference backend here, or `hisparse-bench build` to compile-check only")
    report = build(spec, arch=arch)
    import tvm_ffi  # noqa: PLC0415

    with _LOADED_LOCK:
        mod = _LOADED.get(key)
        if mod is None:
            try:
                mod = tvm_ffi.load_module(str(report.path))
            except Exception as e:  # a .so for another CUDA/driver, missing libcudart, ...
                raise KernelUnavailable(f"cannot load {report.path}: {e}") from e
            if not mod.implements_function(EXPORTED_FUNCTION):
                raise KernelUnavailable(f"{report.path} exports no function {EXPORTED_FUNCTION!r}")
            _LOADED[key] = mod
    return mod


def runner(spec_of: Callable[..., KernelSpec]) -> Callable[..., Any]:
    """``get(*key)`` -> the loaded ``run`` function of ``spec_of(*key)``, memoised by ``key``.

    The ops call it on every launch: after the first call per key it is one dict lookup, with no
    KernelSpec construction or hashing (``load`` memoises too, but by spec)."""
    cache: dict[tuple, Any] = {}

    def get(*key: Any) -> Any:
        fn = cache.get(key)
        if fn is None:
            fn = cache[key] = load(spec_of(*key)).run
        return fn

    return get


def cuda_available() -> bool:
    try:
        import torch  # noqa: PLC0415

        return bool(torch.cuda.is_available())
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------
def _is_built(bdir: Path, so: Path) -> bool:
    stamp = bdir / _STAMP
    if not (so.is_file() and stamp.is_file()):
        return False
    try:
        return json.loads(stamp.read_text()).get("module_name") == so.stem
    except (OSError, ValueError):
        return False


def _write_stamp(bdir: Path, spec: KernelSpec, name: str, arch: str) -> None:
    import tvm_ffi  # noqa: PLC0415

    data = {
        "module_name": name,
        "op": spec.op,
        "entry": spec.entry,
        "template_args": [list(a) for a in spec.template_args],
        "arch": arch,
        "cuda_cflags": list(CUDA_CFLAGS),
        "nvcc_version": env.NVCC_VERSION,
        "tvm_ffi_version": tvm_ffi.__version__,
    }
    write_atomic(bdir / _STAMP, json.dumps(data, indent=1) + "\n")


def _compile(spec: KernelSpec, name: str, bdir: Path, arch: str) -> None:
    cuda_home = env.CUDA_HOME
    if cuda_home is None:
        raise KernelUnavailable(
            f"cannot build {name}: no CUDA toolkit found (no valid CUDA_HOME, no nvcc on PATH, "
            "nothing under /usr/local/cuda*); install the CUDA toolkit or set CUDA_HOME")
    _ensure_ninja_on_path()
    from tvm_ffi import cpp  # noqa: PLC0415

    with _ARCH_GATE.hold(arch, str(cuda_home)):
        try:
            cpp.build_inline(
                name,
                cuda_sources=spec.source(),
                extra_cuda_cflags=list(CUDA_CFLAGS),
                # the .so finds libcudart of the toolkit it was built with when torch has not loaded one
                extra_ldflags=[f"-Wl,-rpath,{Path(cuda_home) / 'lib64'}"],
                extra_include_paths=[str(d) for d in spec.include_dirs()],
                build_directory=str(bdir),
                backend="cuda",
            )
        except RuntimeError as e:
            raise BuildError(
                f"building {name} ({spec.header()}, {spec.cpp_function()}, arch {arch}) failed; "
                f"build dir {bdir}; compiler output:\n{e}") from e


def _ensure_ninja_on_path() -> None:
    """tvm-ffi runs `ninja` from PATH; a venv used without activation has it only next to python."""
    if shutil.which("ninja"):
        return
    candidates = [Path(sys.executable).parent]
    try:
        import ninja  # noqa: PLC0415  (the PyPI package apache-tvm-ffi[cpp] installs)

        candidates.append(Path(ninja.BIN_DIR))
    except Exception:
        pass
    for d in candidates:
        if (d / "ninja").is_file():
            os.environ["PATH"] = f"{d}{os.pathsep}{os.environ.get('PATH', '')}"
            return
    raise KernelUnavailable("ninja not found: install apache-tvm-ffi[cpp] (it brings ninja) or put ninja on PATH")


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(key: str) -> threading.Lock:
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())


class _ArchGate:
    """tvm-ffi reads the target arch (TVM_FFI_CUDA_ARCH_LIST) and CUDA_HOME from os.environ while it
    writes build.ninja. Builds for the same setting run concurrently; a different setting waits."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._setting: tuple[str, str] | None = None
        self._active = 0

    @contextlib.contextmanager
    def hold(self, arch: str, cuda_home: str) -> Iterator[None]:
        setting = (arch, cuda_home)
        with self._cond:
            while self._active and self._setting != setting:
                self._cond.wait()
            if self._active == 0 or self._setting != setting:
                _apply_tvm_env(arch, cuda_home)
                self._setting = setting
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()


_ARCH_GATE = _ArchGate()


def _apply_tvm_env(arch: str, cuda_home: str) -> None:
    env.arch_tag(arch)  # validates
    # Without this tvm-ffi calls nvidia-smi to pick the arch and fails on a machine with no GPU.
    os.environ["TVM_FFI_CUDA_ARCH_LIST"] = " ".join(arch.replace(",", " ").replace(";", " ").split())
    if os.environ.get("CUDA_HOME") != cuda_home:
        os.environ["CUDA_HOME"] = cuda_home
        from tvm_ffi.cpp import extension  # noqa: PLC0415

        clear = getattr(getattr(extension, "_find_cuda_home", None), "cache_clear", None)
        if clear is not None:  # tvm-ffi memoises its (wrapper-fooled) guess
            clear()
