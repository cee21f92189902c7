"""The two implementations of every op, behind one interface.

``get_backend("cuda")``: the tvm-ffi kernels (``hisparse.kernels.ops.*``) on the GPU.
``get_backend("reference")``: the pure-PyTorch references (``hisparse.kernels.reference.*``) on the CPU;
their times are PyTorch times, not kernel times (the CLI says so).
``get_backend("auto")``: cuda when ``torch.cuda.is_available()``, else reference.

Ops are imported on first call (``_LazyOp``), so a module that is missing or fails to import breaks
only the ops that need it; the error surfaces as KernelUnavailable inside the case that called it
(recorded as a failed case), not at startup.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from hisparse.errors import ConfigError, KernelUnavailable

BACKEND_NAMES = ("auto", "cuda", "reference")


class _LazyOp:
    """A keyword-only callable that imports ``module.attr`` on first use."""

    def __init__(self, module: str, attr: str, adapt: Callable[[Callable], Callable] | None = None) -> None:
        self.module, self.attr, self._adapt = module, attr, adapt
        self._fn: Callable | None = None

    def resolve(self) -> Callable:
        if self._fn is None:
            try:
                fn = getattr(importlib.import_module(self.module), self.attr)
            except (ImportError, AttributeError) as e:
                raise KernelUnavailable(f"{self.module}.{self.attr} is unavailable: {type(e).__name__}: {e}") from e
            self._fn = self._adapt(fn) if self._adapt else fn
        return self._fn

    def __call__(self, **kwargs: Any) -> Any:
        return self.resolve()(**kwargs)

    def __repr__(self) -> str:
        return f"<op {self.module}.{self.attr}>"


def _copy_rows_as_gather(copy_rows: Callable) -> Callable:
    """The reference floor gather has gather_floor's signature on top of bytes.copy_rows."""

    def gather_floor(*, src_rows, dst_rows, host_cache, device_buffer, item_size_bytes):
        return copy_rows(host_cache, src_rows, device_buffer, dst_rows, item_size_bytes)

    return gather_floor


def _no_copy_grid(*, device: Any = None) -> int:
    """The reference has no launch: ``lru_sequential_grid`` runs its plain swap (the same result)."""
    return 0


@dataclass(frozen=True)
class Backend:
    name: str  # "cuda" | "reference"
    is_kernel: bool  # True: times are CUDA kernel times; False: PyTorch reference on the CPU
    device: str  # torch device the workload lives on
    swap_single_step: Callable
    swap_multi_step: Callable
    copy_planned: Callable
    gather_floor: Callable
    # ``copy_blocks`` of lru_sequential_grid's single-step swaps on ``device`` (keyword): one CTA per SM
    # on the GPU (swap_single.grid_copy_blocks), 0 in the reference
    single_step_copy_grid: Callable[..., int] = _no_copy_grid

    @property
    def torch_device(self):
        import torch  # noqa: PLC0415

        return torch.device(self.device)

    def describe(self) -> str:
        if self.is_kernel:
            return "cuda (tvm-ffi kernels, CUDA-graph timing)"
        return "reference (PyTorch on the CPU: times are NOT kernel times)"


def _reference() -> Backend:
    return Backend(
        name="reference", is_kernel=False, device="cpu",
        swap_single_step=_LazyOp("hisparse.kernels.reference.swap_single", "swap_single_step"),
        swap_multi_step=_LazyOp("hisparse.kernels.reference.swap_multi", "swap_multi_step"),
        copy_planned=_LazyOp("hisparse.kernels.reference.copy_planned", "copy_planned"),
        gather_floor=_LazyOp("hisparse.kernels.reference.bytes", "copy_rows", _copy_rows_as_gather),
    )


def _cuda() -> Backend:
    import torch  # noqa: PLC0415

    if not torch.cuda.is_available():
        raise KernelUnavailable("backend 'cuda': torch.cuda.is_available() is False (no GPU or driver here); "
                                "use --backend reference")
    return Backend(
        name="cuda", is_kernel=True, device="cuda",
        swap_single_step=_LazyOp("hisparse.kernels.ops.swap_single", "swap_single_step"),
        swap_multi_step=_LazyOp("hisparse.kernels.ops.swap_multi", "swap_multi_step"),
        copy_planned=_LazyOp("hisparse.kernels.ops.copy_planned", "copy_planned"),
        gather_floor=_LazyOp("hisparse.kernels.ops.gather_floor", "gather_floor"),
        single_step_copy_grid=_LazyOp("hisparse.kernels.ops.swap_single", "grid_copy_blocks"),
    )


def resolve_name(name: str) -> str:
    """"auto" -> "cuda" or "reference"; other names are checked and returned."""
    if name not in BACKEND_NAMES:
        raise ConfigError(f"backend: must be one of {', '.join(BACKEND_NAMES)}, got {name!r}")
    if name == "auto":
        import torch  # noqa: PLC0415

        return "cuda" if torch.cuda.is_available() else "reference"
    return name


def get_backend(name: str = "auto") -> Backend:
    return _cuda() if resolve_name(name) == "cuda" else _reference()
