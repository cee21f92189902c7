"""What one swap "call" is, per implementation (docs/semantics.md §4-§5.1):

- ``lru_sequential``: the single-step exact-LRU swap once per step, on the strided views
  ``top_k_tokens[:, s]`` -> ``top_k_device_locs[:, s]``, with its own ``lru_slots`` (upstream
  ``lru_1_full``: S launches, S hot-buffer scans);
- ``multi_step``: one multi-step swap (gather + commit) over all S steps (upstream ``spec_1_full``);
- ``multi_step_planned``: the multi-step swap recording its miss plan, then ``copy_planned`` of that
  plan into each shared-index layer's buffer (upstream ``spec_1_full_3_shared``);
- ``lru_sequential_planned``: its baseline, the same for sequential LRU: per step, the single-step
  swap recording its plan, then ``copy_planned`` of that step's plan into each shared layer.

Every call starts with ``workload.advance()`` (the next call's top-k, on the device), which is inside
the timed region for every implementation, as upstream's ``top_k_tokens[..., -196:].add_(800)``.

``bind(...)`` builds the op invocations once (fixed kwargs over the workload's tensors, mutated in
place) and returns a ``BoundCall`` with three ways to run a call:
- ``call()``: what is timed (and captured in a CUDA graph): no host sync;
- ``checked_call()``: the same ops, each checked by the invariant checker (plus, for the
  single-step swap on a kernel backend, bit-exactness against the reference on clones);
- ``recorded_call()``: the same ops with the miss plan recorded, returning the rows the call copied
  and its hit count (eager, syncs) for the floors and the ``work`` numbers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from hisparse.bench import implementations
from hisparse.errors import HisparseError
from hisparse.kernels.signature import SWAP_SINGLE

SINGLE, MULTI, PLANNED = "single", "multi", "planned"
# Bit-exact LRU comparison clones device_buffer (and the small tables) on the device; above this many
# bytes the check is skipped (it is a second opinion next to the invariants, not the only check).
BIT_EXACT_MAX_BYTES = 2 << 30


@dataclass(frozen=True)
class Invocation:
    kind: str  # SINGLE | MULTI | PLANNED
    fn: Callable[..., Any]
    kwargs: dict[str, Any]
    label: str  # e.g. "step 2", "shared layer 1"


@dataclass(frozen=True)
class Copy:
    """Rows one op copied host -> device: ``dst_buffer[dst_rows[i]] <- host_cache[src_rows[i]]``."""

    src_rows: torch.Tensor  # int64 [n]
    dst_rows: torch.Tensor  # int32 [n]
    host_cache: torch.Tensor
    dst_buffer: torch.Tensor
    layer: int  # 0 = the swapped layer, 1.. = shared layers


@dataclass(frozen=True)
class CallRecord:
    copies: tuple[Copy, ...]
    occurrences: int  # valid top-k entries of real requests, all steps
    hits: int  # of those, tokens resident before the call

    @property
    def primary_rows(self) -> int:
        return sum(int(c.src_rows.numel()) for c in self.copies if c.layer == 0)

    @property
    def total_rows(self) -> int:
        return sum(int(c.src_rows.numel()) for c in self.copies)

    @property
    def distinct_host_rows(self) -> int:
        """Host rows read, each counted once however many requests or layers read it: rows are told
        apart by their place in the host buffer (views of one pinned pool at other offsets are other
        rows), so on `upstream`, whose requests and layers share rows, this is far below ``total_rows``."""
        by_buffer: dict[int, list[torch.Tensor]] = {}
        for c in self.copies:
            if c.src_rows.numel() == 0:
                continue
            h = c.host_cache
            row_bytes = h.stride(0) * h.element_size()
            first = (h.data_ptr() - h.untyped_storage().data_ptr()) // row_bytes  # the view's offset, in rows
            by_buffer.setdefault(h.untyped_storage().data_ptr(), []).append(c.src_rows.to(torch.int64).cpu() + first)
        return sum(int(torch.cat(rows).unique().numel()) for rows in by_buffer.values())


def plan_rows(miss_src: torch.Tensor, miss_dst: torch.Tensor, miss_count: torch.Tensor,
              num_real_reqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(src int64 [n], dst int32 [n]) of a recorded plan, in (request, entry) order, on its device."""
    n = int(num_real_reqs[0])
    width = miss_src.shape[1]
    counts = miss_count[:n].to(torch.int64).clamp(0, width)
    live = torch.arange(width, device=miss_src.device).unsqueeze(0) < counts.unsqueeze(1)
    return miss_src[:n][live].to(torch.int64), miss_dst[:n][live].to(torch.int32)


def count_hits(b: Any) -> tuple[int, int]:
    """(valid occurrences, occurrences whose token is resident) over real requests, before a call."""
    n = int(b.num_real_reqs[0])
    if n == 0:
        return 0, 0
    tok = b.top_k_tokens[:n].reshape(n, -1).to(torch.int64)
    rids = b.req_pool_indices[:n].to(torch.int64)
    resident = torch.sort(b.device_buffer_tokens[rids].to(torch.int64), dim=1).values
    pos = torch.searchsorted(resident, tok).clamp(max=resident.shape[1] - 1)
    valid = tok >= 0
    hit = valid & (torch.gather(resident, 1, pos) == tok)
    return int(valid.sum()), int(hit.sum())


def _buffers(workload: Any) -> Any:
    return workload.buffers


def invocations(implementation: str, backend: Any, workload: Any, *, pdl: bool | None,
                record_plan: bool) -> list[Invocation]:
    """The ops of one call, with their kwargs (``SwapBuffers.*_kwargs``: fixed tensors and views),
    built by the implementation's binder (hisparse/bench/implementations.py names it)."""
    impl = implementations.get(implementation)
    return _BINDERS[impl.binder](backend, workload, impl, pdl=pdl, record_plan=record_plan)


# A binder turns (backend, Workload) into the op invocations of one call, as its row of the
# implementation table says (``planned``, ``copy_grid``). It gets the Workload, not only its buffers:
# sglang's binders register their own state with its reset().


def bind_sequential_lru(backend: Any, workload: Any, impl: Any, *, pdl: bool | None,
                        record_plan: bool) -> list[Invocation]:
    """The single-step swap once per step; with shared layers, each step's plan is replayed into
    them before the next step overwrites it. With ``copy_grid`` the swap records its plan and
    copy_planned copies it over the backend's grid (``copy_blocks``; the reference has none and runs
    the plain swap, whose result is the same), so every call passes a plan."""
    b = _buffers(workload)
    planned = impl.planned
    grid = backend.single_step_copy_grid(device=b.device_buffer.device) if impl.copy_grid else 0
    out = []
    for s in range(b.steps):
        kwargs = b.single_step_kwargs(s, record_plan=record_plan or planned or grid > 0)
        if grid:
            kwargs["copy_blocks"] = grid
        out.append(Invocation(SINGLE, backend.swap_single_step, kwargs, f"step {s}"))
        if planned:
            out += _planned_copies(backend, b, f"step {s} ")
    return out


def bind_multi_step(backend: Any, workload: Any, impl: Any, *, pdl: bool | None,
                    record_plan: bool) -> list[Invocation]:
    """One multi-step swap over all steps; with shared layers, its plan replayed into each."""
    b = _buffers(workload)
    planned = impl.planned
    out = [Invocation(MULTI, backend.swap_multi_step,
                      b.multi_step_kwargs(record_plan=record_plan or planned, pdl=pdl), "multi-step swap")]
    if planned:
        out += _planned_copies(backend, b, "")
    return out


def bind_sglang_lru(backend: Any, workload: Any, impl: Any, *, pdl: bool | None,
                    record_plan: bool) -> list[Invocation]:
    """sglang's single-step swap per step (hisparse/bench/sglang.py builds the calls)."""
    from hisparse.bench import sglang  # noqa: PLC0415

    return [Invocation(*t) for t in
            sglang.lru_invocations(backend, workload, planned=impl.planned, record_plan=record_plan)]


def bind_sglang_multi_step(backend: Any, workload: Any, impl: Any, *, pdl: bool | None,
                           record_plan: bool) -> list[Invocation]:
    """sglang's speculative swap (hisparse/bench/sglang.py builds the calls and its state)."""
    from hisparse.bench import sglang  # noqa: PLC0415

    return [Invocation(*t) for t in
            sglang.multi_step_invocations(backend, workload, planned=impl.planned, record_plan=record_plan)]


_BINDERS = {"bind_sequential_lru": bind_sequential_lru, "bind_multi_step": bind_multi_step,
            "bind_sglang_lru": bind_sglang_lru, "bind_sglang_multi_step": bind_sglang_multi_step}


def _planned_copies(backend: Any, b: Any, prefix: str) -> list[Invocation]:
    """``copy_planned`` of the current plan into every shared layer (label ends with the layer)."""
    return [Invocation(PLANNED, backend.copy_planned, b.copy_planned_kwargs(layer), f"{prefix}shared layer {layer}")
            for layer in range(1, len(b.shared_layer_buffers) + 1)]


@dataclass
class BoundCall:
    implementation: str
    backend: Any
    workload: Any
    pdl: bool | None = None
    _timed: list[Invocation] = field(default_factory=list)
    _recorded: list[Invocation] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._timed = invocations(self.implementation, self.backend, self.workload, pdl=self.pdl,
                                  record_plan=False)
        self._recorded = invocations(self.implementation, self.backend, self.workload, pdl=self.pdl,
                                     record_plan=True)

    def call(self) -> None:
        """One timed call: advance the top-k, then the implementation's ops; no host sync."""
        self.workload.advance()
        for inv in self._timed:
            inv.fn(**inv.kwargs)

    def checked_call(self) -> list:
        """One call of exactly the timed ops, each followed by its checks; returns violations
        (``hisparse.kernels.reference.violation.Violation``-like: invariant, request, entry, detail)."""
        from hisparse.kernels.reference import invariants  # noqa: PLC0415
        from hisparse.kernels.reference.snapshot import snapshot  # noqa: PLC0415

        self.workload.advance()
        found: list = []
        for inv in self._timed:
            if inv.kind == PLANNED:
                inv.fn(**inv.kwargs)
                found += _check_planned(inv)
                continue
            before = snapshot(inv.kwargs)
            exact = _bit_exact_setup(inv, self.backend)
            inv.fn(**inv.kwargs)
            after = snapshot(inv.kwargs)
            check = invariants.check_single_step if inv.kind == SINGLE else invariants.check_multi_step
            found += [_label(v, inv.label) for v in check(inputs=inv.kwargs, before=before, after=after)]
            if exact is not None:
                found += exact()
            if found:
                break
        return found

    def recorded_call(self) -> CallRecord:
        """One call with the miss plan recorded: rows copied per op, hits (eager; syncs)."""
        b = _buffers(self.workload)
        self.workload.advance()
        occurrences, hits = count_hits(b)
        copies: list[Copy] = []
        for inv in self._recorded:
            inv.fn(**inv.kwargs)
            kw = inv.kwargs
            # A swap copies into the swapped layer (0); a planned copy into the shared layer its label names.
            layer = 0 if inv.kind in (SINGLE, MULTI) else int(inv.label.rsplit(" ", 1)[-1])
            src, dst = plan_rows(kw["miss_src"], kw["miss_dst"], kw["miss_count"], kw["num_real_reqs"])
            copies.append(Copy(src.clone(), dst.clone(), kw["host_cache"], kw["device_buffer"], layer))
        return CallRecord(copies=tuple(copies), occurrences=occurrences, hits=hits)


class CopyMismatch(HisparseError):
    """A recorded call's copied rows are not the host rows it planned (a fast wrong kernel)."""


@dataclass
class LayeredCall:
    """The calls of a case in the decode regime (hisparse.bench.workload.LayeredWorkload): call i swaps
    layer ``workload.next_layer`` (i mod L after a reset) with that layer's own BoundCall, so a captured
    graph of n calls runs layers 0, 1, ..., L-1, 0, ... as a decode step does. The first recorded call of
    each layer after a reset also checks, byte for byte, that every row it copied is its host row."""

    workload: Any  # LayeredWorkload
    layers: list[BoundCall]

    def _next(self) -> tuple[int, BoundCall]:
        layer = self.workload.next_layer
        self.workload.next_layer = (layer + 1) % len(self.layers)
        return layer, self.layers[layer]

    def call(self) -> None:
        self._next()[1].call()

    def checked_call(self) -> list:
        layer, bound = self._next()
        return [_label(v, f"layer {layer}") for v in bound.checked_call()]

    def recorded_call(self) -> CallRecord:
        layer, bound = self._next()
        record = bound.recorded_call()
        if bound.workload.calls_since_reset == 1 and (bad := verify_copies(record)):
            raise CopyMismatch(f"recorded call of layer {layer}: {bad}")
        return record


def verify_copies(record: CallRecord) -> str | None:
    """Why a recorded call's copies differ from their host rows (the first differing row), or None."""
    for c in record.copies:
        if c.src_rows.numel() == 0:
            continue
        item = c.host_cache.shape[-1] * c.host_cache.element_size()
        if (bad := _first_mismatch(c.host_cache, c.dst_buffer, c.src_rows, c.dst_rows, item, "copied")) is not None:
            return bad[1]
    return None


def _first_mismatch(host_cache: torch.Tensor, device_buffer: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                    item_size_bytes: int, what: str) -> tuple[int, str] | None:
    """(index, message) of the first row ``device_buffer[dst[i]]`` that is not ``host_cache[src[i]]``, or None."""
    from hisparse.kernels.reference.bytes import as_rows  # noqa: PLC0415

    host, dev = as_rows(host_cache, item_size_bytes), as_rows(device_buffer, item_size_bytes)
    got = dev.index_select(0, dst.to(dev.device, torch.int64)).cpu()
    want = host.index_select(0, src.to(host.device)).cpu()
    bad = torch.nonzero((got != want).any(dim=1)).flatten()
    if bad.numel() == 0:
        return None
    i = int(bad[0])
    return i, (f"device row {int(dst[i])} != host row {int(src[i])} "
               f"({bad.numel()} of {src.numel()} {what} rows differ)")


def bind(implementation: str, backend: Any, workload: Any, *, pdl: bool | None = None) -> BoundCall | LayeredCall:
    """The calls of ``implementation`` over ``workload`` (one layer's, or each layer's of a decode-regime
    workload, taken in turn)."""
    layers = getattr(workload, "layers", None)
    if layers is not None:
        return LayeredCall(workload, [BoundCall(implementation, backend, w, pdl) for w in layers])
    return BoundCall(implementation, backend, workload, pdl)


def call(backend: Any, workload: Any, *, record_plan: bool = False) -> CallRecord | None:
    """One call of ``workload.case.implementation`` (convenience; the harness binds once instead)."""
    case = workload.case
    bound = bind(case.implementation, backend, workload, pdl=case.pdl)
    if record_plan:
        return bound.recorded_call()
    bound.call()
    return None


# ---------------------------------------------------------------------------------------------
# Checks beyond the invariant checker


@dataclass(frozen=True)
class _Mismatch:
    invariant: str
    request: int | None
    entry: tuple | None
    detail: str


def _label(v: Any, label: str) -> Any:
    return _Mismatch(str(v.invariant), v.request, v.entry, f"[{label}] {v.detail}")


def _check_planned(inv: Invocation) -> list:
    """Shared-layer replay: every planned row of the layer's buffer equals its host row."""
    kw = inv.kwargs
    src, dst = plan_rows(kw["miss_src"], kw["miss_dst"], kw["miss_count"], kw["num_real_reqs"])
    bad = _first_mismatch(kw["host_cache"], kw["device_buffer"], src, dst, kw["item_size_bytes"], "planned")
    if bad is None:
        return []
    return [_Mismatch("planned-copy", None, (bad[0],), f"[{inv.label}] {bad[1]}")]


_REFERENCE_ARGS = frozenset(SWAP_SINGLE.names())
_SINGLE_MUTATED = ("device_buffer_tokens", "lru_slots", "top_k_device_locs", "device_buffer",
                   "miss_src", "miss_dst", "miss_count")


def _bit_exact_setup(inv: Invocation, backend: Any) -> Callable[[], list] | None:
    """For the single-step swap on a kernel backend: clone what it mutates (on its device), and
    return a function that runs the reference on the clones and compares everything bit for bit.
    None when not applicable or too large."""
    if inv.kind != SINGLE or not getattr(backend, "is_kernel", False):
        return None
    if not getattr(inv.fn, "reference_exact", True):  # sglang's kernel: bit-exactness is ours to promise
        return None
    kw = inv.kwargs
    size = sum(kw[k].numel() * kw[k].element_size() for k in _SINGLE_MUTATED if kw.get(k) is not None)
    if size > BIT_EXACT_MAX_BYTES:
        return None
    clones = {k: kw[k].clone() for k in _SINGLE_MUTATED if kw.get(k) is not None}
    # top_k_device_locs is a strided column view: clone() is contiguous, same shape and values.

    def compare() -> list:
        from hisparse.kernels.reference.swap_single import swap_single_step as reference  # noqa: PLC0415

        reference(**{k: v for k, v in {**kw, **clones}.items() if k in _REFERENCE_ARGS})  # no launch knobs
        out = []
        for k, ref in clones.items():
            got = kw[k]
            if torch.equal(got, ref):
                continue
            diff = torch.nonzero(got.reshape(got.shape[0], -1) != ref.reshape(ref.shape[0], -1))
            first = tuple(int(x) for x in diff[0]) if diff.numel() else None
            req = first[0] if first and k in ("top_k_device_locs", "miss_src", "miss_dst", "miss_count") else None
            out.append(_Mismatch("bit-exact", req, first,
                                 f"[{inv.label}] {k} differs from the reference at {first} "
                                 f"({diff.shape[0]} entries)"))
        return out

    return compare
