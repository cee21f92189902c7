"""Invariants of the single-step swap (docs/semantics.md §2.4/§2.7) on any implementation's result.

The single-step swap is deterministic and is compared bit for bit with its reference; these checks
say *what* is wrong in a readable way, and hold on inputs the kernel cannot reproduce exactly:
- "1": fast rows (seq_len <= HOT) return ``device_buffer_locs[rid, t]`` for i < min(seq_len, K),
  t >= 0; long rows return slot HOT's row for the newest token (seq_len-1), and for every other
  token a row holding its host bytes (when it has a host row);
- "2": long rows give equal tokens equal rows;
- "7" (residency): after a long row, every non-newest top-k token sits in a hot slot whose row is
  the one returned, and ``lru_slots`` is a permutation of [0, HOT); fast rows change nothing;
- "8": padding rows are all -1, and long rows resolve every non-newest token (>= 0).
Long rows only check tokens >= 0: -1 is the kernel's TOKEN_HIT marker (§2.7), outside the contract.
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

from hisparse.kernels.reference.invariants_multi import data_ok, first_of
from hisparse.kernels.reference.snapshot import Snapshot
from hisparse.kernels.reference.violation import Report, Violation

_SHIFT = 32


def _fast_rows(tok, seq, rids, hot, before: Snapshot, after: Snapshot, out, rep: Report) -> None:
    k = tok.shape[1]
    fast = seq <= hot
    width = before.locs.shape[1]
    live = (torch.arange(k).unsqueeze(0) < seq.clamp(max=k).unsqueeze(1)) & (tok >= 0) & (tok < width)
    rows = before.locs[rids].to(torch.int64)
    want = torch.where(live, rows.gather(1, tok.clamp(0, width - 1)), torch.full_like(tok, -1))
    n = list(range(tok.shape[0]))
    rep.entries("1", fast.unsqueeze(1) & (out != want), n, k,
                lambda i, p: f"fast path: output {int(out[i, p])}, expected {int(want[i, p])}")
    for i in torch.nonzero(fast).flatten().tolist():
        rid = int(rids[i])
        for name, b, a in (("device_buffer_tokens", before.tokens, after.tokens),
                           ("device_buffer_locs", before.locs, after.locs), ("lru_slots", before.lru_slots, after.lru_slots)):
            if not torch.equal(b[rid], a[rid]):
                rep.add("7", i, None, f"fast path changed {name}[{rid}]")


def _long_rows(inputs, tok, seq, rids, hot, before: Snapshot, after: Snapshot, out, rep: Report) -> None:
    n, k = tok.shape
    long_ = (seq > hot).unsqueeze(1)
    newest = long_ & (tok == (seq - 1).unsqueeze(1))
    newest_loc = before.locs[rids, hot].to(torch.int64).unsqueeze(1).expand(n, k)
    rows = list(range(n))
    rep.entries("1", newest & (out != newest_loc), rows, k,
                lambda i, p: f"newest token: output {int(out[i, p])}, expected slot HOT's row {int(newest_loc[i, p])}")
    regular = long_ & (tok >= 0) & ~newest
    rep.entries("8", regular & (out < 0), rows, k, lambda i, p: f"token {int(tok[i, p])} unresolved ({int(out[i, p])})")
    hcl = inputs["host_cache_locs"]
    src = hcl[rids.to(hcl.device).unsqueeze(1), tok.clamp(0, hcl.shape[1] - 1).to(hcl.device)].cpu()
    check = regular & (out >= 0) & (tok < hcl.shape[1]) & (src >= 0)
    bad = torch.zeros_like(check)
    bad[check] = ~data_ok(inputs, after, out[check], src[check])
    rep.entries("1", bad, rows, k, lambda i, p: f"row {int(out[i, p])} does not hold token {int(tok[i, p])}")
    r, p = torch.nonzero(regular, as_tuple=True)
    if r.numel():
        first, _ = first_of((r << _SHIFT) | tok[r, p], r * k + p)
        split = torch.zeros_like(regular)
        split[r, p] = out[r, p] != out.reshape(-1)[first]
        rep.entries("2", split, rows, k, lambda i, q: f"token {int(tok[i, q])} returned in two rows")
    for i in torch.nonzero(long_.squeeze(1)).flatten().tolist():
        rid = int(rids[i])
        held = after.tokens[rid, :hot].to(torch.int64)
        keys = (held << _SHIFT) | (after.locs[rid, :hot].to(torch.int64) & 0xFFFFFFFF)
        pos = torch.nonzero(regular[i]).flatten()
        gone = ~torch.isin((tok[i, pos] << _SHIFT) | (out[i, pos] & 0xFFFFFFFF), keys)
        for q in pos[gone].tolist():
            rep.add("7", i, (q,), f"token {int(tok[i, q])} not resident with row {int(out[i, q])}")
        lru = after.lru_slots[rid].to(torch.int64)
        if not torch.equal(torch.sort(lru).values, torch.arange(hot)):
            rep.add("7", i, None, f"lru_slots[{rid}] is not a permutation of [0, {hot})")


def check_single_step(*, inputs: Mapping, before: Snapshot, after: Snapshot) -> list[Violation]:
    """Violations of invariants 1, 2, 7 (residency) and 8 of one single-step call (entries are (k,))."""
    rep = Report()
    hot = before.lru_slots.shape[1]
    bs, k = inputs["top_k_tokens"].shape
    n = int(inputs["num_real_reqs"][0])
    rids = inputs["req_pool_indices"][:n].cpu().to(torch.int64)
    tok = inputs["top_k_tokens"][:n].cpu().to(torch.int64)
    seq = inputs["seq_lens"][:n].cpu().to(torch.int64)
    out = after.out[:n].to(torch.int64)
    _fast_rows(tok, seq, rids, hot, before, after, out, rep)
    _long_rows(inputs, tok, seq, rids, hot, before, after, out, rep)
    pad = after.out[n:bs].to(torch.int64)
    rep.entries("8", pad != -1, list(range(n, bs)), k, lambda i, p: f"padding row output {int(pad[i, p])}, expected -1")
    # Report.entries names entries (step, k); a single-step row has one step, so keep (k,).
    return [Violation(x.invariant, x.request, x.entry[1:] if x.entry and len(x.entry) == 2 else x.entry, x.detail)
            for x in rep.items]
