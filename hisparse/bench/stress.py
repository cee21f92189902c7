"""Stress sequences: several calls on one multi-step state that a correct kernel must survive.

Each stress case is a sequence of calls on one state (one workload, never reset between calls),
every call checked (``BoundCall.checked_call``: the invariant checker of
hisparse/kernels/reference, byte comparison of every returned row with its token's host row) before
the next. Call kinds (per request; tokens 0..HOT-1 start resident in slots 0..HOT-1):

- ``flood``: every one of the S*K entries a token never seen (all entries miss: unique misses
  S*K, past the scratch rows when S*K > scratch capacity, so direct-overflow victims);
- ``between``: fresh misses only, as many unique ones as lie halfway between the scratch capacity
  and the hot size (or S*K when smaller) (spread over the steps, each step's entries distinct);
- ``above``: fresh misses only, unique misses above the hot size (where S*K allows);
- ``reref``: tokens seen earlier (initially resident ones and earlier calls' misses, many since
  evicted), drawn at random;
- ``mix``: half of the previous call's last-step tokens, half fresh.

The matrix (``default_cases``): steps 2 and 4, hot sizes 4096, 6144, 32768, item sizes 576, 656, 584
and 100 bytes in dense rows (row r at r*item bytes) and in 16-byte aligned rows (the row stride
rounded up to 16: the kernel copies the padding too), top_k 2048, batch 2. ``run_stress`` checks one
(implementation, case); ``report`` tabulates implementation x case -> pass or the first failure.
On the CPU the reference backend runs our reference implementation of the multi-step swap.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from hisparse.bench.case import PAGE_SIZE
from hisparse.kernels import limits
from hisparse.kernels.state import multi_step_sizes, new_multi_step_state

KINDS = ("flood", "between", "above", "reref", "mix")
SEQUENCE = ("flood", "reref", "mix", "between", "above", "reref", "flood", "mix")
STEPS = (2, 4)
HOT_SIZES = (4096, 6144, 32768)
ITEM_SIZES = (576, 656, 584, 100)
LAYOUTS = ("dense", "aligned16")
TOP_K = 2048
BATCH = 2


@dataclass(frozen=True)
class StressCase:
    steps: int
    hot_buffer_size: int
    item_size_bytes: int
    layout: str = "dense"  # "dense" | "aligned16"
    top_k: int = TOP_K
    batch: int = BATCH
    sequence: tuple[str, ...] = SEQUENCE
    seed: int = 0
    shared_layers: int = 1  # planned implementations replay into this many layers

    @property
    def row_bytes(self) -> int:
        """Bytes per row as the kernels see them (``item_size_bytes`` argument)."""
        if self.layout == "aligned16":
            return -(-self.item_size_bytes // 16) * 16
        return self.item_size_bytes

    @property
    def case_id(self) -> str:
        return f"s{self.steps}/h{self.hot_buffer_size}/i{self.item_size_bytes}/{self.layout}"

    @property
    def occurrences(self) -> int:
        return self.steps * self.top_k

    @property
    def scratch_capacity(self) -> int:
        return multi_step_sizes(self.batch, self.steps, self.top_k, self.hot_buffer_size).scratch_capacity


def default_cases() -> list[StressCase]:
    return [StressCase(s, h, i, layout) for s in STEPS for h in HOT_SIZES for i in ITEM_SIZES for layout in LAYOUTS]


# ---------------------------------------------------------------------------------------------
# The top-k of every call


def _spread(tokens: torch.Tensor, steps: int, top_k: int) -> torch.Tensor:
    """[S, K] from ``tokens`` (>= K distinct): step s takes K consecutive of them, cyclically, so each
    step's entries are distinct and every token appears."""
    u = tokens.numel()
    idx = (torch.arange(steps).unsqueeze(1) * top_k + torch.arange(top_k)) % u
    return tokens[idx]


def unique_misses(case: StressCase, kind: str) -> int | None:
    """Unique misses a fresh-only call of ``kind`` asks for; None when the geometry has none."""
    t, c, h, k = case.occurrences, case.scratch_capacity, case.hot_buffer_size, case.top_k
    if kind == "flood":
        return t
    if kind == "between":  # halfway between the scratch rows and what the hot buffer (or the call) holds
        u = (c + min(h, t)) // 2
        return u if c < u <= min(h, t) and u >= k else None
    if kind == "above":
        u = (h + 1 + t) // 2
        return u if h < u <= t else None
    return None


def call_sequence(case: StressCase) -> tuple[list[str], torch.Tensor, int]:
    """(the kinds actually used, top-k int32 [calls, bs, S, K], the host span per request).

    Kinds whose geometry does not exist (``above`` at S*K <= HOT, say) are left out."""
    gen = torch.Generator().manual_seed(case.seed)
    s, k, h = case.steps, case.top_k, case.hot_buffer_size
    kinds = [kd for kd in case.sequence if kd in ("reref", "mix") or unique_misses(case, kd) is not None]
    nxt = [h] * case.batch  # next fresh token per request
    seen = [torch.arange(h) for _ in range(case.batch)]
    last = [torch.arange(k) for _ in range(case.batch)]  # the last step's tokens of the previous call
    calls = []
    for kd in kinds:
        per_req = []
        for r in range(case.batch):
            if kd in ("flood", "between", "above"):
                u = unique_misses(case, kd)
                fresh = torch.arange(nxt[r], nxt[r] + u)
                nxt[r] += u
                top = _spread(fresh, s, k)
            elif kd == "reref":
                pool = torch.unique(torch.cat(seen[r:r + 1] + [last[r]]))
                top = torch.stack([pool[torch.randperm(pool.numel(), generator=gen)[:k]] for _ in range(s)])
            else:  # mix: half the previous last step, half fresh, per step
                keep = k // 2
                fresh = torch.arange(nxt[r], nxt[r] + (k - keep) * s)
                nxt[r] += fresh.numel()
                rows = []
                for st in range(s):
                    old = last[r][torch.randperm(last[r].numel(), generator=gen)[:keep]]
                    rows.append(torch.cat([old, fresh[st * (k - keep):(st + 1) * (k - keep)]]))
                top = torch.stack(rows)
            seen[r] = torch.unique(torch.cat([seen[r], top.reshape(-1)]))
            last[r] = top[-1].clone()
            per_req.append(top)
        calls.append(torch.stack(per_req))
    span = max(nxt) + 1
    return kinds, torch.stack(calls).to(torch.int32), span


# ---------------------------------------------------------------------------------------------
# One state, many calls


class StressWorkload:
    """The Workload protocol the binders and ``BoundCall`` use (``buffers``, ``advance``, ``reset``),
    over a precomputed sequence of top-k; ``advance()`` puts the next call's in place."""

    def __init__(self, case: StressCase, device: str, needs_lru: bool) -> None:
        from hisparse.bench.host_cache import kv_shape  # noqa: PLC0415
        from hisparse.bench.workload import HOST_POOL, SwapBuffers, fill_pattern  # noqa: PLC0415

        self.case, self.device = case, torch.device(device)
        self.kinds, tokens, span = call_sequence(case)
        dev, bs, s, k, hot, page = self.device, case.batch, case.steps, case.top_k, case.hot_buffer_size, PAGE_SIZE
        self._tokens = tokens.to(dev)
        self.calls = 0
        idx = dict(dtype=torch.int64, device=dev)
        # Every token of every request on its own host row (re-referenced evicted tokens are read again).
        host_locs = (torch.arange(bs, **idx).unsqueeze(1) * span + torch.arange(span, **idx)).contiguous()
        host_cache = HOST_POOL.view(bs * span, case.row_bytes, dev)
        scratch = case.scratch_capacity
        stride = hot + page + scratch
        base = torch.arange(bs, **idx).unsqueeze(1) * stride
        locs = (base + torch.arange(hot + page, **idx)).to(torch.int32)
        slot_tokens = torch.full((bs, hot + page), -1, dtype=torch.int32, device=dev)
        slot_tokens[:, :hot] = torch.arange(hot, dtype=torch.int32, device=dev)
        shape, dtype = kv_shape(bs * stride, case.row_bytes)
        device_buffer = torch.zeros(shape, dtype=dtype, device=dev)
        fill_pattern(device_buffer, host_locs[:, :hot].reshape(-1), case.row_bytes, at=locs[:, :hot].reshape(-1))
        scratch_locs = (base + hot + page + torch.arange(scratch, **idx)).to(torch.int32)
        state = new_multi_step_state(bs, s, k, hot, scratch_locs=scratch_locs, device_buffer_tokens=slot_tokens)
        seq_len = span + page + 1
        seq_lens = torch.full((bs * s,), seq_len, dtype=torch.int32, device=dev)
        self.buffers = SwapBuffers(
            host_cache=host_cache, device_buffer=device_buffer, device_buffer_tokens=slot_tokens,
            device_buffer_locs=locs, host_cache_locs=host_locs, top_k_tokens=self._tokens[0].clone(),
            top_k_device_locs=torch.full((bs, s, k), -1, dtype=torch.int32, device=dev), seq_lens=seq_lens,
            step_seq_lens=tuple(seq_lens.view(bs, s)[:, i].contiguous() for i in range(s)),
            req_pool_indices=torch.arange(bs, **idx), num_real_reqs=torch.tensor([bs], dtype=torch.int32, device=dev),
            item_size_bytes=case.row_bytes, page_size=page, hot_buffer_size=hot,
            lru_slots=torch.arange(hot, dtype=torch.int16, device=dev).repeat(bs, 1) if needs_lru else None,
            state=state, miss_src=torch.zeros((bs, s * k), **idx),
            miss_dst=torch.zeros((bs, s * k), dtype=torch.int32, device=dev),
            miss_count=torch.zeros(bs, dtype=torch.int32, device=dev),
            shared_layer_buffers=tuple(device_buffer.clone() for _ in range(case.shared_layers)),
            rows_per_request=stride)
        self._restore: list = []  # sglang's binder registers its state here (never reset: one sequence)

    def reset(self) -> None:
        """A stress sequence runs once on one state: nothing to restore."""

    def advance(self) -> None:
        self.buffers.top_k_tokens.copy_(self._tokens[self.calls])
        self.calls += 1


@dataclass(frozen=True)
class StressResult:
    implementation: str
    case_id: str
    status: str  # "pass" | "fail" | "skipped" | "pruned" | "fault"
    calls: int = 0  # calls that passed
    kinds: tuple[str, ...] = ()
    failure: str | None = None  # "call 3 (reref): invariant 7 failed for request 0 ...", or the skip reason

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kinds"] = list(self.kinds)
        return d

    @property
    def cell(self) -> str:
        if self.status == "pass":
            return f"pass ({self.calls} calls)"
        return f"{self.status}: {self.failure}"


def multi_step_implementations() -> tuple[str, ...]:
    from hisparse.bench import implementations  # noqa: PLC0415

    return tuple(i.name for i in implementations.TABLE if i.multi_step)


def prune(implementation: str, case: StressCase) -> str | None:
    """Why ``implementation`` cannot take ``case`` (its table limits, upstream's contract)."""
    from hisparse.bench import implementations  # noqa: PLC0415

    impl = implementations.get(implementation)
    s, k, h = case.steps, case.top_k, case.hot_buffer_size
    if not 1 <= s <= limits.MAX_STEPS or s * k > limits.MAX_STEPS_X_TOP_K:
        return f"steps {s} x top_k {k}: outside steps 1..{limits.MAX_STEPS}, steps*top_k <= {limits.MAX_STEPS_X_TOP_K}"
    if k > h:
        return f"top_k {k} > hot_buffer_size {h}"
    if case.hot_buffer_size > impl.max_hot_buffer_size:
        return f"hot_buffer_size {case.hot_buffer_size} > {impl.max_hot_buffer_size}"
    if impl.source == "sglang":
        from hisparse.bench import sglang  # noqa: PLC0415

        return sglang.prune_reason(implementation, {"steps": case.steps, "top_k": case.top_k, "pdl": True,
                                                    "hot_buffer_size": case.hot_buffer_size, "batch": case.batch})
    return None


def run_stress(implementation: str, case: StressCase, backend: Any) -> StressResult:
    """Every call of ``case``'s sequence on one state, each checked before the next; the first
    failure ends it. Never raises for a failing kernel (the exception is the failure)."""
    from hisparse.bench import calls, implementations, measure  # noqa: PLC0415

    why = prune(implementation, case)
    if why is not None:
        return StressResult(implementation, case.case_id, "pruned", failure=why)
    if implementations.get(implementation).source == "sglang":
        from hisparse.bench import sglang  # noqa: PLC0415

        skip = sglang.unavailable_reason(backend=backend)
        if skip is not None:
            return StressResult(implementation, case.case_id, "skipped", failure=skip)
    wl = None
    kinds: tuple[str, ...] = ()
    done = 0
    try:
        wl = StressWorkload(case, backend.device, needs_lru=not implementations.get(implementation).multi_step)
        kinds = tuple(wl.kinds)
        bound = calls.bind(implementation, backend, wl, pdl=True)
        for j, kind in enumerate(kinds):
            violations = bound.checked_call()
            if violations:
                return StressResult(implementation, case.case_id, "fail", done, kinds,
                                    f"call {j} ({kind}): " + measure.format_violations(violations))
            done += 1
    except Exception as e:  # noqa: BLE001 (a kernel error is a result of the kernel)
        where = f"call {done} ({kinds[done]}): " if done < len(kinds) else ""
        return StressResult(implementation, case.case_id, "fail", done, kinds, f"{where}{type(e).__name__}: {e}")
    finally:
        wl = None
        measure.release(backend.device)
    return StressResult(implementation, case.case_id, "pass", done, kinds)


def stress_job(backend: Any, *, implementation: str, case: dict) -> tuple[dict, str | None]:
    """A worker job (hisparse/bench/sglang.py Worker): one stress case."""
    case = dict(case)
    case["sequence"] = tuple(case["sequence"])
    result = run_stress(implementation, StressCase(**case), backend)
    return result.to_dict(), result.failure


@dataclass
class StressReport:
    results: list[StressResult] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.status in ("fail", "fault") for r in self.results)

    def table(self) -> str:
        """Markdown: implementation x case -> pass or the first failure."""
        impls = list(dict.fromkeys(r.implementation for r in self.results))
        cases = list(dict.fromkeys(r.case_id for r in self.results))
        cell = {(r.implementation, r.case_id): r.cell for r in self.results}
        lines = ["| case | " + " | ".join(impls) + " |", "|---|" + "---|" * len(impls)]
        for c in cases:
            lines.append(f"| {c} | " + " | ".join(cell.get((i, c), "-").replace("|", "/") for i in impls) + " |")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"results": [r.to_dict() for r in self.results]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StressReport":
        """The report of a ``check --json`` file (complete or not); raises ValueError naming what is wrong."""
        rows = data.get("results") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ValueError("not a check report: no 'results' list")
        try:
            return cls([StressResult(**{**r, "kinds": tuple(r.get("kinds", ()))}) for r in rows])
        except TypeError as e:
            raise ValueError(f"not a check report: {e}") from None


def run_all(implementations: tuple[str, ...], cases: list[StressCase], backend: Any, *,
            isolate: bool | None = None, progress: Any = None,
            report: StressReport | None = None) -> StressReport:
    """Every (implementation, case). ``isolate`` (default: on a kernel backend): every job runs in a
    worker process (hisparse/bench/isolate.py; ours too: dense 100-byte rows are misaligned for 16-byte
    loads), so a CUDA fault is recorded as ``fault`` and the rest goes on in a fresh worker.
    ``report``: the report to grow (it may hold an interrupted run's cells, ``check --resume``: those are
    kept, not re-run); each result is appended before ``progress`` sees it."""
    isolate = getattr(backend, "is_kernel", False) if isolate is None else isolate
    report = StressReport() if report is None else report
    finished = {(r.implementation, r.case_id) for r in report.results}
    worker = None
    try:
        for impl in implementations:
            for case in cases:
                if (impl, case.case_id) in finished:
                    continue
                if isolate and prune(impl, case) is None:
                    if worker is None:
                        from hisparse.bench.isolate import Worker  # noqa: PLC0415

                        worker = Worker(backend.name)
                    d = asdict(case)
                    d["sequence"] = list(case.sequence)
                    out, what = worker.call(f"{impl} {case.case_id}", "hisparse.bench.stress:stress_job",
                                            implementation=impl, case=d)
                    result = (StressResult(**{**out, "kinds": tuple(out["kinds"])}) if out is not None else
                              StressResult(impl, case.case_id, "fault", failure=f"worker process {what}"))
                else:
                    result = run_stress(impl, case, backend)
                report.results.append(result)
                if progress is not None:
                    progress(result)
    finally:
        if worker is not None:
            worker.close()
    return report


__all__ = ["HOT_SIZES", "ITEM_SIZES", "KINDS", "LAYOUTS", "SEQUENCE", "STEPS", "StressCase", "StressReport",
           "StressResult", "StressWorkload", "call_sequence", "default_cases", "multi_step_implementations",
           "prune", "run_all", "run_stress", "unique_misses"]
