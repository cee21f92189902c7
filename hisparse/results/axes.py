"""What a case is, read from its stored params and floors: the implementation and whose it is, the
workload, the layer regime, the case's relative noise. One reader for the text summary, compare, the
plots and the dashboard, so they all group and label cases the same way.

The ``layers`` workload parameter (``serving``, ``trace``, ``distinct``): 1 is the "warm" regime (every
call on one host pool, address translations warm); L > 1 is "decode" (calls rotate over L per-layer
host pools, translations cold). Files written before it existed have no ``layers``: they are warm.

``host_alloc`` and ``host_numa`` (where a case's host pool lives) are stored only when not the harness's
default (hisparse/bench/case.py), so an absent key means that default: ``pinned`` and ``any``. This is a
fact of the file format, fixed for every file written; tests/results/test_axes.py holds the harness's
defaults equal to it, so changing a default there means storing the key in every case first.
"""
from __future__ import annotations

from typing import Any

# Implementations whose kernels are sglang's (bench/implementations.py, source "sglang"): their
# changes are information, not ours to gate. The name prefix is the table's convention and needs
# no import of the engine (track and render stay torch-free).
COUNTERPART_PREFIX = "sglang"


def implementation(case: Any) -> str:
    return str((case.params or {}).get("implementation") or case.case_id.split("/")[0])


def is_ours(impl: str) -> bool:
    return not impl.startswith(COUNTERPART_PREFIX)


def workload(case: Any) -> str:
    params = case.params or {}
    if params.get("workload"):
        return str(params["workload"])
    parts = case.case_id.split("/")
    return parts[1] if len(parts) > 1 else "?"


def layers(params: dict | None) -> int:
    """``params.workload_params.layers``; 1 (warm) when absent."""
    wp = (params or {}).get("workload_params") or {}
    try:
        return max(1, int(wp.get("layers", 1)))
    except (TypeError, ValueError):
        return 1


def regime(params: dict | None) -> str:
    """"warm" (L = 1) or "decode L=N"."""
    n = layers(params)
    return "warm" if n == 1 else f"decode L={n}"


HOST_ALLOC_WHEN_ABSENT = "pinned"
HOST_NUMA_WHEN_ABSENT = "any"


def host_alloc(params: dict | None) -> str:
    """How the case's host pool was allocated (``pinned`` when the file does not say)."""
    return str((params or {}).get("host_alloc", HOST_ALLOC_WHEN_ABSENT))


def host_numa(params: dict | None) -> str:
    """The case's NUMA placement of its host pool (``any`` when the file does not say)."""
    return str((params or {}).get("host_numa", HOST_NUMA_WHEN_ABSENT))


def gather_warm_us(floor: dict | None) -> float | None:
    """The bare gather of the same rows with L = 1 (``floors.gather_warm_us``), where recorded."""
    value = (floor or {}).get("gather_warm_us")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def relative_noise(summary: Any) -> float | None:
    """IQR / median of a case's samples (0.01 = 1%); None without samples."""
    if summary is None or not summary.median:
        return None
    return (summary.q3 - summary.q1) / summary.median
