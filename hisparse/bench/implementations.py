"""THE implementation table: every implementation the harness can time, and everything about it.

Adding an implementation is one row here (plus its binder in hisparse/bench/calls.py when it calls
ops in a new way). Everything else reads this table: the case model (which parameters apply, the
pruning rules, the baseline of the speedup), ``hisparse-bench build`` (which kernels to compile),
the engine (how one call is bound), the plots and the dashboard (series).

This module imports no torch: the CLI lists and prunes cases without it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from hisparse.kernels import limits


@dataclass(frozen=True)
class Implementation:
    """One row of the table.

    name:       the ``implementation`` axis value.
    ops:        kernel ops its calls launch (hisparse/kernels/ops/<op>.py); ``gather_floor`` is the
                in-run floor measured next to every case on a GPU.
    binder:     function of hisparse/bench/calls.py that turns a workload into the op invocations
                of one call.
    baseline:   the implementation doing the same work by sequential LRU, which its speedup is
                measured against (None: it is a baseline).
    multi_step: one launch covers every step (has the multi-step state; ``pdl`` applies).
    planned:    also copies the miss plan into ``shared_layers`` shared-index layers.
    default:    swept when a config has no implementation axis.
    max_hot_buffer_size: the largest hot buffer its kernels take (kernels/limits.py).
    source:     whose kernels: "hisparse" (ours, built by ``hisparse-bench build``) or "sglang"
                (sglang's own entry points, hisparse/bench/sglang.py; sglang JIT-builds them itself,
                so their ``ops`` name only the floor).
    counterpart: for an sglang row, our implementation doing the same work: the engine links our
                case to sglang's case of the same parameters (``counterpart_link``, ours/sglang).
    copy_grid:  the single-step swap records its plan and copy_planned copies it over one CTA per SM
                (swap_single's ``copy_blocks``), instead of the swap kernel copying on one CTA per request.
    """

    name: str
    ops: tuple[str, ...]
    binder: str
    baseline: str | None
    multi_step: bool
    planned: bool
    default: bool
    max_hot_buffer_size: int
    source: str = "hisparse"
    counterpart: str | None = None
    copy_grid: bool = False

    @property
    def uses_pdl(self) -> bool:
        return self.multi_step


TABLE: tuple[Implementation, ...] = (
    Implementation("lru_sequential", ("swap_single", "gather_floor"), "bind_sequential_lru",
                   baseline=None, multi_step=False, planned=False, default=True,
                   max_hot_buffer_size=limits.MAX_LRU_HOT_BUFFER_SIZE),
    Implementation("multi_step", ("swap_multi", "gather_floor"), "bind_multi_step",
                   baseline="lru_sequential", multi_step=True, planned=False, default=True,
                   max_hot_buffer_size=limits.MAX_HOT_BUFFER_SIZE),
    Implementation("multi_step_planned", ("swap_multi", "copy_planned", "gather_floor"), "bind_multi_step",
                   baseline="lru_sequential_planned", multi_step=True, planned=True, default=True,
                   max_hot_buffer_size=limits.MAX_HOT_BUFFER_SIZE),
    # opt-in: only worth its time next to multi_step_planned (configs without it keep their hash)
    Implementation("lru_sequential_planned", ("swap_single", "copy_planned", "gather_floor"), "bind_sequential_lru",
                   baseline=None, multi_step=False, planned=True, default=False,
                   max_hot_buffer_size=limits.MAX_LRU_HOT_BUFFER_SIZE),
    # opt-in: lru_sequential with its copy over one CTA per SM (configs/lru-copy.yaml), not inside the swap
    # kernel on one CTA per request: the same result, another copy structure, timed beside it
    Implementation("lru_sequential_grid", ("swap_single", "copy_planned", "gather_floor"), "bind_sequential_lru",
                   baseline=None, multi_step=False, planned=False, default=False,
                   max_hot_buffer_size=limits.MAX_LRU_HOT_BUFFER_SIZE, copy_grid=True),
    # opt-in: sglang's own kernels through its Python entry points (issue 12), side by side with ours.
    # No sglang sequential-LRU planned variant exists, so the planned row is its own baseline.
    Implementation("sglang_lru_sequential", ("gather_floor",), "bind_sglang_lru",
                   baseline=None, multi_step=False, planned=False, default=False,
                   max_hot_buffer_size=limits.MAX_LRU_HOT_BUFFER_SIZE, source="sglang",
                   counterpart="lru_sequential"),
    Implementation("sglang_multi_step", ("gather_floor",), "bind_sglang_multi_step",
                   baseline="sglang_lru_sequential", multi_step=True, planned=False, default=False,
                   max_hot_buffer_size=limits.MAX_HOT_BUFFER_SIZE, source="sglang", counterpart="multi_step"),
    Implementation("sglang_multi_step_planned", ("gather_floor",), "bind_sglang_multi_step",
                   baseline=None, multi_step=True, planned=True, default=False,
                   max_hot_buffer_size=limits.MAX_HOT_BUFFER_SIZE, source="sglang",
                   counterpart="multi_step_planned"),
)

BY_NAME: dict[str, Implementation] = {impl.name: impl for impl in TABLE}
IMPLEMENTATIONS: tuple[str, ...] = tuple(BY_NAME)
DEFAULT_IMPLEMENTATIONS: tuple[str, ...] = tuple(i.name for i in TABLE if i.default)


def get(name: str) -> Implementation:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"implementation: must be one of {', '.join(IMPLEMENTATIONS)}, got {name!r}") from None


# ---------------------------------------------------------------------------------------------
# Kernel specs: what `hisparse-bench build` compiles for a case. Knobs that are not case fields
# (block sizes, loads in flight) are the ops' constants, the same ones the wrappers launch with.


def _op_specs(op: str, case: Any) -> list:
    module = importlib.import_module(f"hisparse.kernels.ops.{op}")
    if op == "swap_multi":
        return module.kernel_specs(pdl=case.pdl)
    if op == "swap_single":
        return module.kernel_specs(plan_only=get(case.implementation).copy_grid)
    return module.kernel_specs()


def kernel_specs(case: Any) -> list:
    """The KernelSpecs ``case`` needs (both plan variants where the harness records a plan), and the host
    entries of its host memory where it has some (``vmm``: hisparse/bench/host_vmm.py)."""
    impl = get(case.implementation)
    specs = [spec for op in impl.ops for spec in _op_specs(op, case)]
    if getattr(case, "host_alloc", None) == "vmm":
        from hisparse.bench import host_vmm  # noqa: PLC0415

        specs += list(host_vmm.SPECS)
    return specs
