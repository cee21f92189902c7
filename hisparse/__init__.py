"""hisparse: HiSparse KV-cache swap kernels, their PyTorch reference, and a benchmark harness.

The package is six wings with imports running one way (tests/test_architecture.py holds it):

    cli -> render -> track -> results <- bench -> kernels     (all may use env, errors, stats, files, gitutil)

- ``hisparse.kernels``: the kernel library an inference engine could vendor: the tvm-ffi JIT, the
  ops (``swap_single_step``, ``swap_multi_step``, ``copy_planned``, ``gather_floor``), their PyTorch
  references, the multi-step state, input validation, the invariant checker and the limits.
- ``hisparse.bench``: cases, sweep configs, the implementation table, workloads, timing, floors.
- ``hisparse.results``: the run file (its one reader and writer) and run metadata.
- ``hisparse.track``: A/B comparison and the nightly gate (one regression policy), history, asv.
- ``hisparse.render``: text tables, plots, the dashboard.
- ``hisparse.cli``: the ``hisparse-bench`` commands.

The names below are the public API. They are imported on first use, so ``import hisparse`` stays
cheap (no torch) and the CLI's ``--help`` fast.
"""
from __future__ import annotations

import importlib
from typing import Any

from hisparse.env import VERSION as __version__

# public name -> module that defines it
_EXPORTS = {
    # kernels: the ops on the GPU and their references
    "swap_single_step": "hisparse.kernels.ops.swap_single",
    "swap_multi_step": "hisparse.kernels.ops.swap_multi",
    "copy_planned": "hisparse.kernels.ops.copy_planned",
    "gather_floor": "hisparse.kernels.ops.gather_floor",
    "MultiStepState": "hisparse.kernels.state",
    "new_multi_step_state": "hisparse.kernels.state",
    "check_single_step": "hisparse.kernels.reference.invariants",
    "check_multi_step": "hisparse.kernels.reference.invariants",
    # bench
    "Case": "hisparse.bench.case",
    "SweepConfig": "hisparse.bench.config",
    "load_config": "hisparse.bench.config",
    "IMPLEMENTATIONS": "hisparse.bench.implementations",
    "run_sweep": "hisparse.bench.measure",
    # results
    "RunRecord": "hisparse.results.model",
    "CaseResult": "hisparse.results.model",
    "load_run": "hisparse.results.model",
    # track
    "compare": "hisparse.track.compare",
}

# public name -> submodule handed out as it is
_MODULES = {"limits": "hisparse.kernels.limits", "reference": "hisparse.kernels.reference"}

__all__ = ["__version__", *_EXPORTS, *_MODULES]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'hisparse' has no attribute {name!r}")
    globals()[name] = value
    return value
