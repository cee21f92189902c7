"""compare's verdicts as pyperf's ``compare_to`` reads them: per case "1.08x slower" / "1.05x faster",
whose implementation it is (ours, or sglang's counterpart: information only), each side's relative
noise (IQR / median), how far the case's own gather floor moved, and the geometric mean of B/A per
implementation, workload and layer regime.
Returns data only: render/text.py formats it, cli/compare.py prints it and decides the exit status.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hisparse.results import axes
from hisparse.results.model import RunRecord
from hisparse.track import policy as pol
from hisparse.track.compare import floor_ratio, floor_step, gather_floor_of

SORTS = ("case", "change")


@dataclass(frozen=True)
class Change:
    """One case of B against A."""

    verdict: pol.Verdict
    implementation: str
    workload: str
    regime: str
    ours: bool
    noise_a: float | None  # IQR / median of A's samples
    noise_b: float | None
    floor_a: float | None = None  # the case's bare gather of its rows (floor.gather_floor_us), us
    floor_b: float | None = None

    @property
    def case_id(self) -> str:
        return str(self.verdict.case_id)

    @property
    def ratio(self) -> float | None:
        r = self.verdict.ratio
        return r if r is not None and math.isfinite(r) and r > 0 else None

    @property
    def floor_ratio(self) -> float | None:
        """B's gather floor over A's for this case: the node's (or the rows') part of the change."""
        return floor_ratio(self.floor_a, self.floor_b)

    @property
    def floor_step(self) -> float | None:
        """``floor_ratio`` where it lies beyond compare's floor (track.compare.floor_step), else None."""
        return floor_step(self.floor_a, self.floor_b)

    @property
    def moved_with_floor(self) -> bool:
        """Regressed or improved, with the case's floor stepped (``floor_step``) the same way."""
        step, r = self.floor_step, self.ratio
        return (self.verdict.status in (pol.REGRESSED, pol.IMPROVED) and step is not None and r is not None
                and (step > 1) == (r > 1))

    @property
    def shown(self) -> bool:
        """pyperf hides the rows that are not significant: here every "unchanged" verdict."""
        return self.verdict.status != pol.UNCHANGED

    @property
    def noisiest(self) -> float | None:
        known = [n for n in (self.noise_a, self.noise_b) if n is not None]
        return max(known) if known else None

    def to_dict(self) -> dict:
        v = self.verdict
        return {"case_id": self.case_id, "implementation": self.implementation, "workload": self.workload,
                "regime": self.regime, "ours": self.ours, "status": v.status, "a_median_us": v.base_median,
                "b_median_us": v.head_median, "ratio": self.ratio, "change": change_words(self.ratio),
                "ci_low": v.ci_low, "ci_high": v.ci_high, "p_value": v.p_value, "threshold": v.threshold,
                "a_noise": self.noise_a, "b_noise": self.noise_b, "a_floor_us": self.floor_a,
                "b_floor_us": self.floor_b, "floor_ratio": self.floor_ratio, "note": v.note}


@dataclass(frozen=True)
class GeoMean:
    """Geometric mean of B/A over the rated cases of one implementation, workload and regime."""

    implementation: str
    workload: str
    regime: str
    ours: bool
    ratio: float
    cases: int

    def to_dict(self) -> dict:
        return {"implementation": self.implementation, "workload": self.workload, "regime": self.regime,
                "ours": self.ours, "ratio": self.ratio, "change": change_words(self.ratio), "cases": self.cases}


def change_words(ratio: float | None) -> str:
    """pyperf's wording of B/A: "1.08x slower", "1.05x faster" (the factor >= 1 either way), "same"."""
    if ratio is None:
        return "-"
    if round(ratio, 2) == 1.0:
        return "same"
    return f"{ratio:.2f}x slower" if ratio > 1 else f"{1 / ratio:.2f}x faster"


def changes(verdicts: list[pol.Verdict], run_a: RunRecord, run_b: RunRecord) -> list[Change]:
    """One Change per verdict, in the verdicts' order."""
    out = []
    for v in verdicts:
        ca, cb = run_a.case(v.case_id), run_b.case(v.case_id)
        impl = axes.implementation(ca)
        out.append(Change(v, impl, axes.workload(ca), axes.regime(ca.params), axes.is_ours(impl),
                          _noise(ca), _noise(cb), gather_floor_of(ca), gather_floor_of(cb)))
    return out


def _noise(case: Any) -> float | None:
    return axes.relative_noise(case.summary) if case is not None and case.ok else None


def sort_changes(rows: list[Change], key: str) -> list[Change]:
    """"case": as given (run A's order); "change": the most slowed first, the most sped up last."""
    if key not in SORTS:
        raise ValueError(f"sort: one of {SORTS}, got {key!r}")
    if key == "case":
        return list(rows)
    return sorted(rows, key=lambda c: -(c.ratio if c.ratio is not None else 0.0))


def geometric_means(rows: list[Change]) -> list[GeoMean]:
    """Per (implementation, workload, regime), in first-seen order, over the cases with a ratio."""
    groups: dict[tuple[str, str, str], list[Change]] = {}
    for c in rows:
        groups.setdefault((c.implementation, c.workload, c.regime), []).append(c)
    out = []
    for (impl, wl, reg), members in groups.items():
        logs = [math.log(c.ratio) for c in members if c.ratio is not None]
        if logs:
            out.append(GeoMean(impl, wl, reg, members[0].ours, math.exp(sum(logs) / len(logs)), len(logs)))
    return out


def judged(rows: list[Change], *, all_implementations: bool = False) -> list[Change]:
    """The rows the exit status judges: ours only, unless ``all_implementations``."""
    return [c for c in rows if c.ours or all_implementations]


def noisy(rows: list[Change], threshold: float) -> list[Change]:
    """Cases whose IQR / median on either side exceeds ``threshold``: the gate cannot resolve them."""
    return [c for c in rows if c.noisiest is not None and c.noisiest > threshold]


CSV_COLUMNS = ("case_id", "implementation", "workload", "regime", "ours", "status", "a_median_us", "b_median_us",
               "ratio", "change", "ci_low", "ci_high", "p_value", "threshold", "a_noise", "b_noise", "a_floor_us",
               "b_floor_us", "floor_ratio", "note")
