"""A/B comparison of two runs, case by case. Returns data only (pyperf practice 11): rendering is in
render/text.py and the exit code is decided in commands/compare.py.

For every case id present in both runs: ratio = median(B) / median(A) (> 1: B is slower, every
``*_us`` metric is lower-is-better), a bootstrap CI of that ratio (two-level, rounds then samples,
where the run file records ``timing.samples_per_round``), the two-sided Mann-Whitney U p-value on the
raw samples, and a classification:
- "regressed": significant (p < alpha) and ratio > 1 + threshold;
- "improved":  significant and ratio < 1 - threshold;
- "unchanged": everything else (a significant shift smaller than the threshold is noise for a gate);
- "failed":    either side has no timing (failed/skipped case); ``note`` says which side.

A side whose samples fall into two separated modes (``stats.modes``) is named in ``note``; when both
are bimodal the note gives the ratio of their mode centres, which is the stable comparison there
(the median moves with the mix of the two modes). The classification itself is unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from hisparse import stats
from hisparse.results import metadata
from hisparse.results.model import RunRecord

CLASSES = ("improved", "regressed", "unchanged", "failed")


@dataclass(frozen=True)
class Verdict:
    case_id: str
    classification: str
    base_median_us: float | None
    head_median_us: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    significant: bool
    n_base: int
    n_head: int
    note: str | None = None

    @property
    def regressed(self) -> bool:
        return self.classification == "regressed"

    @property
    def newly_failed(self) -> bool:
        """The base timed this case and the head did not (e.g. a correctness failure)."""
        return self.classification == "failed" and self.note == "failed in B"


def compare_samples(
    case_id: str,
    base: list[float] | tuple[float, ...],
    head: list[float] | tuple[float, ...],
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
    confidence: float = 0.95,
    seed: int = 0,
    rounds_base: list[int] | tuple[int, ...] | None = None,
    rounds_head: list[int] | tuple[int, ...] | None = None,
    replays_base: list[float] | tuple[float, ...] | None = None,
    replays_head: list[float] | tuple[float, ...] | None = None,
) -> Verdict:
    """Verdict for one case from raw samples (base = A, head = B); ``rounds_*``: samples per timing
    round of each side, for the CI (stats.bootstrap_ratio_ci); ``replays_*``: every replay's time where
    a sample averaged several (``CaseResult.replay_us``), for the note on two modes."""
    if threshold < 0:
        raise ValueError(f"threshold: must be >= 0, got {threshold}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: must be in (0, 1), got {alpha}")
    mb, mh = stats.median(base), stats.median(head)
    ratio = mh / mb if mb != 0 else math.nan
    lo, hi = stats.bootstrap_ratio_ci(base, head, confidence=confidence, seed=seed, rounds_a=rounds_base,
                                      rounds_b=rounds_head)
    p = stats.mann_whitney_u(head, base).p_value
    significant = p < alpha
    note = modes_note(replays_base or base, replays_head or head)
    if significant and ratio > 1 + threshold:
        cls = "regressed"
    elif significant and ratio < 1 - threshold:
        cls = "improved"
    else:
        cls = "unchanged"
    return Verdict(case_id=case_id, classification=cls, base_median_us=mb, head_median_us=mh, ratio=ratio,
                   ci_low=lo, ci_high=hi, p_value=p, significant=significant, n_base=len(base),
                   n_head=len(head), note=note)


def modes_note(base: list[float] | tuple[float, ...], head: list[float] | tuple[float, ...]) -> str | None:
    """"bimodal in A" / "in B" / "in both, modes B/A 1.002, 0.998" (low and high mode centres), or None."""
    ma, mb = stats.modes(base), stats.modes(head)
    if not (ma or mb):
        return None
    if not (ma and mb):
        return "bimodal in " + ("A" if ma else "B")
    ratios = ", ".join(f"{b.center / a.center:.3f}" if a.center else "nan" for a, b in zip(ma, mb))
    return f"bimodal in both, modes B/A {ratios}"


def within(verdicts: list[Verdict], threshold: float) -> tuple[int, int]:
    """(cases whose median ratio is within 1 +- threshold, cases with a ratio): re-run agreement."""
    rated = [v for v in verdicts if v.ratio is not None and not math.isnan(v.ratio)]
    return sum(1 for v in rated if abs(v.ratio - 1) <= threshold), len(rated)


def compare(
    run_a: RunRecord,
    run_b: RunRecord,
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
    confidence: float = 0.95,
) -> list[Verdict]:
    """One Verdict per case id common to both runs, in run A's order."""
    verdicts = []
    for ca in run_a.cases:
        cb = run_b.case(ca.case_id)
        if cb is None:
            continue
        if not (ca.ok and cb.ok):
            side = "both" if not ca.ok and not cb.ok else ("A" if not ca.ok else "B")
            verdicts.append(Verdict(
                case_id=ca.case_id, classification="failed",
                base_median_us=ca.median_us if ca.ok else None, head_median_us=cb.median_us if cb.ok else None,
                ratio=None, ci_low=None, ci_high=None, p_value=None, significant=False,
                n_base=len(ca.samples_us), n_head=len(cb.samples_us), note=f"failed in {side}",
            ))
            continue
        verdicts.append(compare_samples(ca.case_id, ca.samples_us, cb.samples_us, threshold=threshold,
                                        alpha=alpha, confidence=confidence,
                                        rounds_base=ca.timing.get("samples_per_round"),
                                        rounds_head=cb.timing.get("samples_per_round"),
                                        replays_base=ca.replay_us, replays_head=cb.replay_us))
    return verdicts


def only_in(run_a: RunRecord, run_b: RunRecord) -> tuple[list[str], list[str]]:
    """(case ids only in A, case ids only in B)."""
    a, b = set(run_a.case_ids()), set(run_b.case_ids())
    return [c for c in run_a.case_ids() if c not in b], [c for c in run_b.case_ids() if c not in a]


def comparability_warnings(run_a: RunRecord, run_b: RunRecord) -> list[str]:
    """Reasons the two runs' numbers may not be comparable (different backend, GPU, driver, ...).
    The commit is expected to differ in an A/B comparison, so it is not listed."""
    out = []
    if run_a.backend != run_b.backend:
        out.append(f"backend: {run_a.backend!r} != {run_b.backend!r}")
    keys = tuple(k for k in metadata.CHECKED_KEYS if k != "git_commit")
    out += metadata.mismatches(run_a.environment, run_b.environment, keys)
    return out


def any_regression(verdicts: list[Verdict]) -> bool:
    return any(v.regressed for v in verdicts)
