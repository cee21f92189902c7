"""The multi-step invariants (docs/semantics.md §8.2, adapted), one function each, on a ``MultiView``.

Every check holds for any correct implementation, including the non-deterministic CUDA kernel:
nothing depends on which unique-miss index or victim a miss got, only on sets, counts and bytes.
Entry-level checks are vectorised over [n, T]; per-request checks loop over real rows (<= batch).
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

from hisparse.kernels.reference.bytes import as_rows
from hisparse.kernels.reference.cuckoo import hot_lookup
from hisparse.kernels.reference.occurrences import MultiView, first_positions
from hisparse.kernels.reference.snapshot import Snapshot, gather_rows
from hisparse.kernels.reference.violation import Report
from hisparse.kernels.state import FLAG_HASH_DEGRADED, next_epoch

_SHIFT = 32  # (row or token) << 32 | value: tokens, rows and slots are all < 2^31


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.shape[1] % 8 == 0:  # 8x fewer elements to compare
        a, b = a.view(torch.int64), b.view(torch.int64)
    return (a == b).all(dim=1)


def _host_rows(inputs: Mapping, src: torch.Tensor) -> torch.Tensor:
    return gather_rows(as_rows(inputs["host_cache"], inputs["item_size_bytes"]), src).cpu()


def data_ok(inputs: Mapping, after: Snapshot, dev_rows: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Device row dev_rows[i] (after the call) holds host row src[i]; computed once per distinct pair."""
    if dev_rows.numel() == 0:
        return torch.ones(0, dtype=torch.bool)
    pairs, inv = torch.unique((dev_rows << _SHIFT) | src, return_inverse=True)
    data, captured = after.rows(pairs >> _SHIFT)
    ok = captured & _same_bytes(data, _host_rows(inputs, pairs & 0xFFFFFFFF))
    return ok[inv]


def first_of(keys: torch.Tensor, flat_pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(index into keys of each key's first occurrence, per element), plus the distinct keys."""
    uniq, inv = torch.unique(keys, return_inverse=True)
    first = torch.full((uniq.numel(),), 1 << 62, dtype=torch.int64)
    first.scatter_reduce_(0, inv, flat_pos, reduce="amin")
    return first[inv], uniq


def _rows(v: MultiView) -> list[int]:
    return list(range(v.n))


def inv1_data(v: MultiView, inputs: Mapping, after: Snapshot, rep: Report) -> None:
    """Every resolved entry's row holds its token: tail hits a tail slot's loc, hot hits the slot's
    loc, and (host row present) the host bytes."""
    tok, out, k = v.tok, v.out, v.top_k
    rep.entries("1", v.tail & ~v.tail_ok, _rows(v), k,
                lambda i, p: f"extra-page token {int(tok[i, p])}: output {int(out[i, p])} is not the row of a tail slot holding it")
    bad_hit = v.hot_hit & (out != v.hit_loc)
    rep.entries("1", bad_hit, _rows(v), k,
                lambda i, p: f"token {int(tok[i, p])} resident in slot {int(v.slot[i, p])} (row {int(v.hit_loc[i, p])}) but output is {int(out[i, p])}")
    check = (v.hot_hit | v.miss) & (v.src >= 0) & (out >= 0) & ~bad_hit
    ok = data_ok(inputs, after, out[check], v.src[check])
    bad = torch.zeros_like(check)
    bad[check] = ~ok
    rep.entries("1", bad, _rows(v), k,
                lambda i, p: f"device row {int(out[i, p])} does not hold token {int(tok[i, p])} (host row {int(v.src[i, p])})")


def inv2_dedup(v: MultiView, rep: Report) -> None:
    """All occurrences of a token in a row get one loc (tail hits excepted: the extra page is
    checked per step's seq_len, so one token may legitimately resolve there in one step only)."""
    cand = v.valid & ~v.tail
    r, p = torch.nonzero(cand, as_tuple=True)
    if r.numel() == 0:
        return
    first, _ = first_of((r << _SHIFT) | v.tok[r, p], r * v.occurrences + p)
    first_out = v.out.reshape(-1)[first]
    bad = torch.zeros_like(cand)
    bad[r, p] = v.out[r, p] != first_out
    fo = torch.zeros_like(v.out)
    fo[r, p] = first_out
    rep.entries("2", bad, _rows(v), v.top_k,
                lambda i, q: f"token {int(v.tok[i, q])} has output {int(v.out[i, q])}, its first occurrence {int(fo[i, q])}")


def inv8_outputs(v: MultiView, after: Snapshot, rep: Report) -> None:
    """Padding rows all -1; invalid and host-missing entries -1; hits and misses resolved (>= 0);
    distinct tokens never share a returned row (a shared row would be overwritten for one of them).
    That returned rows still hold their data after the call is the data check of invariant 1."""
    k = v.top_k
    pad = after.out[v.n:v.batch].reshape(v.batch - v.n, v.occurrences).to(torch.int64)
    pad_rows = list(range(v.n, v.batch))
    rep.entries("8", pad != -1, pad_rows, k, lambda i, p: f"padding row output {int(pad[i, p])}, expected -1")
    out, tok = v.out, v.tok
    rep.entries("8", (~v.valid | v.host_missing) & (out != -1), _rows(v), k,
                lambda i, p: f"token {int(tok[i, p])} is invalid or not on host and not resident: output {int(out[i, p])}, expected -1")
    unresolved = (v.miss | (v.hot_hit & (v.hit_loc >= 0))) & (out < 0)
    rep.entries("8", unresolved, _rows(v), k, lambda i, p: f"token {int(tok[i, p])} left unresolved ({int(out[i, p])})")
    r, p = torch.nonzero(out >= 0, as_tuple=True)
    if r.numel():
        keys = (r << _SHIFT) | out[r, p]
        uniq, inv = torch.unique(keys, return_inverse=True)
        low = torch.full((uniq.numel(),), 1 << 62, dtype=torch.int64).scatter_reduce_(0, inv, tok[r, p], reduce="amin")
        shared = torch.zeros_like(v.valid)
        shared[r, p] = tok[r, p] != low[inv]
        other = torch.zeros_like(out)
        other[r, p] = low[inv]
        rep.entries("8", shared, _rows(v), k,
                    lambda i, q: f"row {int(out[i, q])} returned for tokens {int(other[i, q])} and {int(tok[i, q])}")


def miss_table(v: MultiView, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens, first positions, returned locs) of real row i's distinct misses, by first occurrence."""
    first = v.miss_first[i]
    return v.tok[i, first], first, v.out[i, first]


def inv3_counts(v: MultiView, before: Snapshot, after: Snapshot, rep: Report) -> None:
    """Unique-miss count = |distinct misses| in counters (and plan); workspace counters back to 0;
    the epoch advances by one and the cursor by min(misses, HOT)."""
    for i in range(v.n):
        rid = int(v.rids[i])
        mc = int(miss_table(v, i)[0].numel())
        c = after.state["counters"][rid].tolist()
        if c[0] != mc:
            rep.add("3", i, None, f"counters[{rid},0] = {c[0]}, expected {mc} unique misses")
        if c[1] != 0 or c[2] != 0:
            rep.add("3", i, None, f"counters[{rid},1:3] = {c[1:3]}, expected [0, 0] between calls")
        if after.miss_count is not None and int(after.miss_count[i]) != mc:
            rep.add("3", i, None, f"miss_count[{i}] = {int(after.miss_count[i])}, expected {mc}")
        e0, c0 = before.state["clock"][rid].tolist()
        c0 %= v.hot
        want = [next_epoch(e0), (c0 + min(mc, v.hot)) % v.hot if mc else c0]
        got = after.state["clock"][rid].tolist()
        if got != want:
            rep.add("3", i, None, f"clock[{rid}] = {got}, expected {want} (epoch +1, cursor + min(misses, HOT))")
    if after.miss_count is not None:
        for b in range(v.n, v.batch):
            if int(after.miss_count[b]) != 0:
                rep.add("3", b, None, f"padding row miss_count {int(after.miss_count[b])}, expected 0")


def inv4_plan(v: MultiView, after: Snapshot, rep: Report) -> None:
    """The plan lists each unique miss exactly once, as (its host row, the row it was returned in).

    A listed pair is then exactly a (host row, returned row) pair whose bytes invariant 1 compares,
    so "the data matches" is checked there, once; a dst row the miss was not returned in is a wrong
    pair here."""
    if after.miss_count is None:
        return
    width = min(after.miss_src.shape[1], after.miss_dst.shape[1])
    for i in range(v.n):
        toks, first, locs = miss_table(v, i)
        srcs = v.src[i, first]
        c = max(0, min(int(after.miss_count[i]), width))
        ps, pd = after.miss_src[i, :c].to(torch.int64), after.miss_dst[i, :c].to(torch.int64)
        want = (srcs << _SHIFT) | (locs & 0xFFFFFFFF)
        got = (ps << _SHIFT) | (pd & 0xFFFFFFFF)
        first_got, _ = first_of(got, torch.arange(c))
        wrong = ~torch.isin(got, want) | (first_got != torch.arange(c))
        for u in torch.nonzero(wrong).flatten().tolist():
            rep.add("4", i, (u,), f"plan entry (src {int(ps[u])}, dst {int(pd[u])}) is not a distinct unique miss "
                                  "(host row, returned row)")
        for j in torch.nonzero(~torch.isin(want, got)).flatten().tolist():
            rep.add("4", i, None, f"unique miss token {int(toks[j])} (host row {int(srcs[j])}, row {int(locs[j])}) "
                                  "missing from the plan")


def _multiset_diff(before_rows: torch.Tensor, after_rows: torch.Tensor) -> list[tuple[int, int, int]]:
    """(loc, count before, count after) for every loc whose multiplicity changed."""
    if torch.equal(torch.sort(before_rows).values, torch.sort(after_rows).values):
        return []
    ub, cb = torch.unique(before_rows, return_counts=True)
    ua, ca = torch.unique(after_rows, return_counts=True)
    locs = torch.unique(torch.cat([ub, ua]))
    nb = torch.zeros_like(locs)
    na = torch.zeros_like(locs)
    nb[torch.searchsorted(locs, ub)] = cb
    na[torch.searchsorted(locs, ua)] = ca
    diff = torch.nonzero(nb != na).flatten().tolist()
    return [(int(locs[j]), int(nb[j]), int(na[j])) for j in diff]


def _state_rows(snap: Snapshot) -> dict[str, torch.Tensor]:
    rows = {"device_buffer_tokens": snap.tokens, "device_buffer_locs": snap.locs}
    rows.update({f"state.{k}": t.reshape(t.shape[0], -1) for k, t in snap.state.items()})
    return rows


def inv5_rows(v: MultiView, before: Snapshot, after: Snapshot, rep: Report) -> None:
    """Rotation permutes rows: {hot-slot locs} + {scratch locs} is the same multiset after the call.
    The extra page, and every request slot not in the batch, are left untouched."""
    hot = v.hot
    for i in range(v.n):
        rid = int(v.rids[i])
        b_rows = torch.cat([before.locs[rid, :hot], before.state["scratch_locs"][rid]]).to(torch.int64)
        a_rows = torch.cat([after.locs[rid, :hot], after.state["scratch_locs"][rid]]).to(torch.int64)
        for loc, nb, na in _multiset_diff(b_rows, a_rows):
            rep.add("5", i, (loc,), f"row {loc} held {nb}x before and {na}x after (hot-slot locs + scratch locs)")
        for name, tb, ta in (("device_buffer_tokens", before.tokens, after.tokens),
                             ("device_buffer_locs", before.locs, after.locs)):
            for p in torch.nonzero(tb[rid, hot:] != ta[rid, hot:]).flatten().tolist():
                rep.add("5", i, (hot + p,), f"{name}[{rid}, {hot + p}] (extra page) changed")
    touched = set(v.rids.tolist())
    for name, tb in _state_rows(before).items():
        ta = _state_rows(after)[name]
        changed = (tb != ta).any(dim=1)
        for rid in torch.nonzero(changed).flatten().tolist():
            if rid not in touched:
                rep.add("5", None, None, f"{name} row {rid} changed, but request slot {rid} is not in the batch")


def inv6_index(v: MultiView, after: Snapshot, rep: Report) -> None:
    """No token twice in the hot buffer; every resident token findable by the §3.5 lookup
    (identity fast path or a bank entry) unless the request is flagged degraded."""
    hot = v.hot
    toks = after.tokens[v.rids, :hot].to(torch.int64)
    r, s = torch.nonzero(toks >= 0, as_tuple=True)
    if r.numel():
        first, _ = first_of((r << _SHIFT) | toks[r, s], r * hot + s)
        for j in torch.nonzero(first != r * hot + s).flatten().tolist():
            i, slot = int(r[j]), int(s[j])
            rep.add("6", i, (slot,), f"token {int(toks[i, slot])} in slot {slot} is also in slot {int(first[j]) % hot}")
    degraded = (after.state["counters"][v.rids, 3] & FLAG_HASH_DEGRADED) != 0
    query = torch.where(toks >= 0, toks, torch.full_like(toks, -1))
    found = hot_lookup(query, toks, after.state["hash_index"][v.rids], torch.zeros_like(degraded))
    lost = (toks >= 0) & (found < 0) & ~degraded.unsqueeze(1)
    for i, slot in torch.nonzero(lost).tolist():
        rep.add("6", i, (slot,), f"token {int(toks[i, slot])} in slot {slot} is not findable (no identity, no bank entry)")


def _budget(v: MultiView, misses: int, hits: int) -> int:
    """Approximate-mode admission budget (§3.7): all of HOT unless overflow, where the direct
    overflow misses and this call's hits come off first."""
    if misses <= v.capacity:
        return v.hot
    return max(0, v.hot - hits - (misses - v.capacity))


def _resident(v: MultiView, after: Snapshot) -> torch.Tensor:
    """[n, T]: a hot slot holds the entry's token with the entry's returned row after the call."""
    hot = v.hot
    held = after.tokens[v.rids, :hot].to(torch.int64)
    keys = (held << _SHIFT) | (after.locs[v.rids, :hot].to(torch.int64) & 0xFFFFFFFF)
    keys = torch.where(held >= 0, keys, torch.full_like(keys, -1))
    keys = torch.sort(keys, dim=1).values
    want = (v.tok.clamp(min=0) << _SHIFT) | (v.out & 0xFFFFFFFF)
    pos = torch.searchsorted(keys, want).clamp(max=hot - 1)
    return keys.gather(1, pos) == want


def _mask_of(positions: tuple[torch.Tensor, ...], shape: tuple[int, int]) -> torch.Tensor:
    mask = torch.zeros(shape, dtype=torch.bool)
    for i, pos in enumerate(positions):
        mask[i, pos] = True
    return mask


def inv7_residency(v: MultiView, after: Snapshot, rep: Report) -> None:
    """Union mode (misses + distinct hits <= HOT): every hit and miss token is resident afterwards,
    in a slot whose row is the one returned. Approximate mode: the last step's hits stay resident,
    and at least min(last-step distinct misses, budget) of its misses are resident."""
    shape = (v.n, v.occurrences)
    resident = _resident(v, after)
    union = torch.tensor([v.miss_first[i].numel() + v.union_hits[i] <= v.hot for i in range(v.n)], dtype=torch.bool)
    last = v.last_step().unsqueeze(0)
    approx = ~union.unsqueeze(1)
    last_hits = _mask_of(first_positions(v.tok, v.hot_hit & last & approx), shape)
    need = (union.unsqueeze(1) & (_mask_of(v.hit_first, shape) | _mask_of(v.miss_first, shape))) | last_hits
    rep.entries("7", need & ~resident, list(range(v.n)), v.top_k,
                lambda i, p: f"{'union' if union[i] else 'approximate (last-step hit)'}: token {int(v.tok[i, p])} "
                             f"not resident with row {int(v.out[i, p])}")
    last_misses = first_positions(v.tok, v.miss & last & approx)
    for i in torch.nonzero(~union).flatten().tolist():
        want = min(last_misses[i].numel(), _budget(v, v.miss_first[i].numel(), v.union_hits[i]))
        got = int(resident[i, last_misses[i]].sum())
        if got < want:
            rep.add("7", i, None, f"approximate: {got} of the last step's {last_misses[i].numel()} misses resident, "
                                  f"expected >= {want}")
