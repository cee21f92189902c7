"""`compare`: the regression policy (track/policy.py) applied to two runs case by case, without history
and without a confirming re-run. Returns data only: rendering is in render/text.py and the exit code
is decided in cli/compare.py.

For every case id present in both runs: the policy's Verdict on the raw samples (p < alpha and a
median change beyond max(floor, noise_factor * within-run noise); the floor is the policy's
``min_effect_unknown_noise``, since a lone pair knows nothing of the case's run-to-run noise), plus
a bootstrap CI of the median ratio B/A (two-level, rounds then samples, where the run file records
``timing.samples_per_round``). A case either side did not time is "failed"; ``note`` says which side.

A side whose samples fall into two separated modes (``stats.modes``) is named in ``note``; when both
are bimodal the note gives the ratio of their mode centres, which is the stable comparison there
(the median moves with the mix of the two modes). The verdict itself is unchanged.

Two runs are comparable only on the same backend, GPU and config (``incomparable``); other
environment differences (driver, torch, ...) are warnings.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hisparse import stats
from hisparse.results import metadata
from hisparse.results.model import RunRecord
from hisparse.track import policy as pol
from hisparse.track.policy import DEFAULT_POLICY, RegressionPolicy, Verdict  # noqa: F401  Verdict: one type

def lone_pair_policy(policy: RegressionPolicy = DEFAULT_POLICY, *, threshold: float | None = None,
                     alpha: float | None = None) -> RegressionPolicy:
    """``policy`` with compare's two knobs: ``threshold`` is the floor of a lone pair
    (``min_effect_unknown_noise``), ``alpha`` the significance level."""
    changes = {}
    if threshold is not None:
        changes["min_effect_unknown_noise"] = threshold
    if alpha is not None:
        changes["alpha"] = alpha
    return replace(policy, **changes) if changes else policy


def compare_samples(
    case_id: str,
    base: list[float] | tuple[float, ...],
    head: list[float] | tuple[float, ...],
    *,
    policy: RegressionPolicy = DEFAULT_POLICY,
    threshold: float | None = None,
    alpha: float | None = None,
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
    policy = lone_pair_policy(policy, threshold=threshold, alpha=alpha)
    v = pol.judge(base, head, policy, case_id=case_id)
    lo, hi = stats.bootstrap_ratio_ci(base, head, confidence=confidence, seed=seed, rounds_a=rounds_base,
                                      rounds_b=rounds_head)
    return replace(v, ci_low=lo, ci_high=hi, note=modes_note(replays_base or base, replays_head or head))


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
    policy: RegressionPolicy = DEFAULT_POLICY,
    threshold: float | None = None,
    alpha: float | None = None,
    confidence: float = 0.95,
) -> list[Verdict]:
    """One Verdict per case id common to both runs, in run A's order (``threshold``/``alpha``: see
    ``lone_pair_policy``)."""
    policy = lone_pair_policy(policy, threshold=threshold, alpha=alpha)
    verdicts = []
    for ca in run_a.cases:
        cb = run_b.case(ca.case_id)
        if cb is None:
            continue
        if not (ca.ok and cb.ok):
            side = "both" if not ca.ok and not cb.ok else ("A" if not ca.ok else "B")
            verdicts.append(Verdict(
                case_id=ca.case_id, status=pol.FAILED, base_median=ca.median_us if ca.ok else None,
                head_median=cb.median_us if cb.ok else None, worse_by=None, p_value=None, threshold=None,
                noise=None, alpha=policy.alpha, n_base=len(ca.samples_us), n_head=len(cb.samples_us),
                note=f"failed in {side}",
            ))
            continue
        verdicts.append(compare_samples(ca.case_id, ca.samples_us, cb.samples_us, policy=policy,
                                        confidence=confidence,
                                        rounds_base=ca.timing.get("samples_per_round"),
                                        rounds_head=cb.timing.get("samples_per_round"),
                                        replays_base=ca.replay_us, replays_head=cb.replay_us))
    return verdicts


# Ours against sglang's within one run: the pair differs only where the two cases' samples say so
# (Mann-Whitney U, two-sided, at the regression rule's alpha). The spread between runs is compare's.
PAIR_ALPHA = DEFAULT_POLICY.alpha


@dataclass(frozen=True)
class Pair:
    """One of our cases against sglang's: ours/sglang medians (the stored link; None: sglang's case not
    timed) and the two-sided Mann-Whitney p of their samples (None where there is no ratio)."""

    ratio: float | None
    p_value: float | None = None

    @property
    def differs(self) -> bool:
        return self.ratio is not None and self.p_value is not None and self.p_value < PAIR_ALPHA

    @property
    def tie(self) -> bool:
        """Rated, but the samples do not tell the two kernels apart."""
        return self.ratio is not None and not self.differs

    @classmethod
    def of_samples(cls, ratio: float | None, ours: Sequence[float], theirs: Sequence[float]) -> Pair:
        """The pair of a ratio and the two sides' samples (no p without a ratio or with a side empty)."""
        if ratio is None or not ours or not theirs:
            return cls(ratio)
        return cls(ratio, stats.mann_whitney_u(ours, theirs).p_value)


def pair_of(run: RunRecord, case) -> Pair:
    """Our ``case``'s pair in ``run`` (it must carry a ``counterpart_link``)."""
    link = case.counterpart_link
    theirs = run.case(link.case_id)
    return Pair.of_samples(link.ratio, case.samples_us, theirs.samples_us if theirs is not None and theirs.ok else [])


@dataclass(frozen=True)
class PairRatio:
    """One case of ours that both runs linked to sglang's counterpart (``CaseResult.counterpart_link``):
    ours/sglang median in A and in B (None where that side's sglang case was not timed), and each side's
    Mann-Whitney p of the two cases' samples (``pair_of``)."""

    case_id: str
    counterpart: str
    ratio_a: float | None
    ratio_b: float | None
    p_a: float | None = None
    p_b: float | None = None

    @property
    def pair_a(self) -> Pair:
        return Pair(self.ratio_a, self.p_a)

    @property
    def pair_b(self) -> Pair:
        return Pair(self.ratio_b, self.p_b)


def counterpart_ratios(run_a: RunRecord, run_b: RunRecord) -> list[PairRatio]:
    """The stored ours/sglang ratio of A and of B, with each side's p, for every case of ours both runs
    linked to the same sglang case, in run A's order; empty when either run has no pair."""
    out = []
    for ca in run_a.cases:
        cb = run_b.case(ca.case_id)
        la, lb = ca.counterpart_link, cb.counterpart_link if cb is not None else None
        if la is not None and lb is not None and la.case_id == lb.case_id:
            out.append(PairRatio(ca.case_id, la.case_id, la.ratio, lb.ratio,
                                 pair_of(run_a, ca).p_value, pair_of(run_b, cb).p_value))
    return out


def only_in(run_a: RunRecord, run_b: RunRecord) -> tuple[list[str], list[str]]:
    """(case ids only in A, case ids only in B)."""
    a, b = set(run_a.case_ids()), set(run_b.case_ids())
    return [c for c in run_a.case_ids() if c not in b], [c for c in run_b.case_ids() if c not in a]


def incomparable(run_a: RunRecord, run_b: RunRecord) -> list[str]:
    """Why a verdict between the two runs would mean nothing: a different backend (a CUDA run against
    the CPU reference is a 100x "regression"), GPU or config name. Empty when comparable."""
    out = []
    if run_a.backend != run_b.backend:
        out.append(f"backend: {run_a.backend!r} != {run_b.backend!r}")
    if run_a.environment.get("gpu") != run_b.environment.get("gpu"):
        out.append(f"gpu: {run_a.environment.get('gpu')!r} != {run_b.environment.get('gpu')!r}")
    if run_a.config.get("name") != run_b.config.get("name"):
        out.append(f"config name: {run_a.config.get('name')!r} != {run_b.config.get('name')!r}")
    return out


def comparability_warnings(run_a: RunRecord, run_b: RunRecord) -> list[str]:
    """Other differences that may move the numbers (machine, driver, torch, the host, ...). The commit is
    expected to differ in an A/B comparison, and backend/GPU are ``incomparable``'s, so neither is listed."""
    keys = tuple(k for k in metadata.CHECKED_KEYS if k not in ("git_commit", "gpu"))
    out = metadata.mismatches(run_a.environment, run_b.environment, keys)
    # Two nodes of one machine name can have hosts that gather scattered rows at different rates
    # (metadata.HOST_KEYS). Only files that describe their host can say so.
    if metadata.records_host(run_a.environment) and metadata.records_host(run_b.environment):
        out += metadata.mismatches(run_a.environment, run_b.environment, metadata.HOST_KEYS)
    return out


# How far the floors of two runs may lie apart before a comparison says so: the lone pair's threshold
# (policy.min_effect_unknown_noise), since a node that shifts every floor by that much shifts the cases too.
FLOOR_SHIFT = DEFAULT_POLICY.min_effect_unknown_noise


def floor_moved(ratio: float, limit: float = FLOOR_SHIFT) -> bool:
    """Whether a floor's ratio between two runs lies beyond ``limit`` either way."""
    return abs(math.log(ratio)) > math.log1p(limit)


@dataclass(frozen=True)
class FloorShift:
    """B over A of a floor both runs measured: ``ratio`` > 1 means B's node is slower there."""
    name: str
    ratio: float
    cases: int  # cases the geometric mean is over (0: a run-level floor such as the pinned copy)


def _case_shift(run_a: RunRecord, run_b: RunRecord, name: str, value) -> FloorShift | None:
    """Geometric mean, over the cases ok in both runs with ``value(case)`` in both, of B's over A's."""
    logs = []
    for case_a in run_a.cases:
        case_b = run_b.case(case_a.case_id)
        if case_b is None or not (case_a.ok and case_b.ok):
            continue
        r = floor_ratio(value(case_a), value(case_b))
        if r is not None:
            logs.append(math.log(r))
    return FloorShift(name, math.exp(sum(logs) / len(logs)), len(logs)) if logs else None


def floor_ratio(floor_a: float | None, floor_b: float | None) -> float | None:
    """B's floor over A's; None unless both are known and positive."""
    return floor_b / floor_a if floor_a is not None and floor_b is not None and min(floor_a, floor_b) > 0 else None


def gather_floor_of(case) -> float | None:
    """A timed case's bare gather of its rows (``floor.gather_floor_us``), us; None when it has none."""
    return _floor("gather_floor_us")(case) if case is not None and case.ok else None


def floor_step(floor_a: float | None, floor_b: float | None) -> float | None:
    """B's floor over A's for one case where it moved beyond compare's floor (``floor_moved``), else None.
    A case whose own floor moved as much as it did changed with the node or its rows, not with the
    kernels alone: nodes of one GPU model gather the same rows at different rates (docs/regression.md)."""
    r = floor_ratio(floor_a, floor_b)
    return r if r is not None and floor_moved(r) else None


def case_floor_step(run_a: RunRecord, run_b: RunRecord, case_id: str) -> float | None:
    """``floor_step`` of one case's gather floor between two runs."""
    return floor_step(gather_floor_of(run_a.case(case_id)), gather_floor_of(run_b.case(case_id)))


def _floor(key: str):
    return lambda case: (case.floor or {}).get(key)


def gather_floor_shift(run_a: RunRecord, run_b: RunRecord) -> FloorShift | None:
    """Geometric mean, over the cases timed in both runs, of B's bare gather of the case's rows over A's
    (``floor.gather_floor_us``: the same rows, in the case's regime). None when no case has it in both."""
    return _case_shift(run_a, run_b, "bare gather", _floor("gather_floor_us"))


def warm_gather_shift(run_a: RunRecord, run_b: RunRecord) -> FloorShift | None:
    """The same for the decode-regime cases' warm gather of their rows (``floor.gather_warm_us``): the
    host's rate with the translations warm, so a shift here is the host's, not the translations'."""
    return _case_shift(run_a, run_b, "warm bare gather", _floor("gather_warm_us"))


def translation_shift(run_a: RunRecord, run_b: RunRecord) -> FloorShift | None:
    """The same for the decode-regime cases' cold over warm gather (``derived.translation_cost``): what
    cold host-address translations cost each node. H100 SXM nodes of one machine name have paid about 1.0x and
    1.18x at batch 64 (docs/perf-notes.md, 2026-12-07), so a decode figure can move with this alone."""
    return _case_shift(run_a, run_b, "translation", lambda case: case.derived["translation_cost"])


def pinned_copy_shift(run_a: RunRecord, run_b: RunRecord) -> FloorShift | None:
    """A's pinned host->device rate over B's (a time ratio, as the gather's), when both runs measured it."""
    ga, gb = (r.floors.get("pinned_h2d_gbps") for r in (run_a, run_b))
    return FloorShift("pinned host->device copy", ga / gb, 0) if ga and gb and ga > 0 and gb > 0 else None


def floor_warnings(run_a: RunRecord, run_b: RunRecord, limit: float = FLOOR_SHIFT,
                   names: tuple[str, str] = ("A", "B")) -> list[str]:
    """One line per floor that moved beyond ``limit`` between the runs (``names``: how the lines call
    them; the gate's are the base and the head). Two nodes of one machine name and one host description
    have gathered the same scattered rows 1.4x apart (docs/known-issues.md): every case then moves with
    the node, and only the floors, measured in each run, show it."""
    out = []
    for shift in (gather_floor_shift(run_a, run_b), warm_gather_shift(run_a, run_b), pinned_copy_shift(run_a, run_b)):
        if shift is None or not floor_moved(shift.ratio, limit):
            continue
        over = f" (geometric mean over {shift.cases} case(s))" if shift.cases else ""
        out.append(f"the {shift.name} floor takes {shift.ratio:.2f}x {names[0]}'s time in {names[1]}{over}: "
                   "the nodes, the cases' rows or the floor's own code differ, so each case's change mixes that "
                   "with the kernels'; "
                   "compare each case against its floor (`/ gather floor`), or runs of one node")
    translation = translation_shift(run_a, run_b)
    if translation is not None and floor_moved(translation.ratio, limit):
        out.append(f"the decode-regime cases' cold over warm bare gather is {translation.ratio:.2f}x in {names[1]} "
                   f"what it is in {names[0]} (geometric mean over {translation.cases} case(s)): cold host-address "
                   "translations cost the two nodes differently, so those cases move with the node as well as with "
                   "the kernels; compare them against their floor (`/ gather floor`), or runs of one node")
    return out


def node_warnings(run_a: RunRecord, run_b: RunRecord, names: tuple[str, str] = ("A", "B")) -> list[str]:
    """What besides the code differs between two runs: the environment (comparability_warnings) and floors
    that moved (floor_warnings). A run on a node whose host gathers 1.4x slower is slower in every case;
    these lines say why, and no verdict changes."""
    return ([f"runs differ in {w}" for w in comparability_warnings(run_a, run_b)]
            + floor_warnings(run_a, run_b, names=names))


def resume_warnings(run_a: RunRecord, run_b: RunRecord) -> list[str]:
    """One line per run that ``--resume`` continued: its cases came from more than one session, possibly
    from different machine starts, and a change between A and B may be one between those sessions."""
    out = []
    for label, run in (("A", run_a), ("B", run_b)):
        if run.resumes:
            out.append(f"{label} ({run.run_id}) was resumed {len(run.resumes)} time(s): {run.resumed_case_count} "
                       f"of its {len(run.cases)} case(s) were timed by a resume, possibly on another machine start")
    return out


def any_regression(verdicts: list[Verdict]) -> bool:
    return any(v.regressed for v in verdicts)
