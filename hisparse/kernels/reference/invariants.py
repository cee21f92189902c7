"""Invariant checker for any swap implementation (reference or CUDA kernel), docs/semantics.md §8.2.

Usage::

    before = snapshot(kwargs)       # CPU clones of what the op mutates
    op(**kwargs)                    # reference or kernel
    after = snapshot(kwargs)
    violations = check_multi_step(inputs=kwargs, before=before, after=after)   # [] when correct

Multi-step invariants (``Violation.invariant``; entries (step, k) unless noted):
1. every resolved entry's device row holds its token: extra-page hits return a tail slot's row,
   hot hits the slot's row, and rows of tokens with a host row hold the host bytes;
2. within a row, all (non-extra-page) occurrences of a token get one row;
3. counters[rid, 0] and miss_count[b] = |distinct misses| (= valid tokens that are neither in the
   extra page, nor resident, nor host-missing); work counters 0; epoch +1, cursor + min(misses, HOT);
   padding rows' miss_count 0 (entry None);
4. the plan lists each unique miss once as (host row, returned row) (entry (u,), or None for a
   miss absent from the plan); the bytes of such a pair are the bytes 1 checks;
5. {hot-slot locs} + {scratch locs} is the same multiset after the call (entry (loc,)); the extra
   page (entry (slot,)) and slots not in the batch (request None) are untouched;
6. no token twice in device_buffer_tokens[:HOT]; each resident token is findable through the §3.5
   lookup (identity or a bank entry) unless the request is flagged degraded (entry (slot,));
7. union mode: every hit and miss token is resident in a slot holding the returned row; approximate
   mode: the last step's hits are, and at least min(last-step misses, budget) of its misses (None);
8. padding rows are -1; invalid and host-missing entries are -1; hits and misses are resolved; no
   row is returned for two tokens. (That no returned row was overwritten during the call is checked
   through its bytes after the call, i.e. by 1.)
"""
from __future__ import annotations

from collections.abc import Mapping

from hisparse.kernels.reference.invariants_multi import (
    inv1_data,
    inv2_dedup,
    inv3_counts,
    inv4_plan,
    inv5_rows,
    inv6_index,
    inv7_residency,
    inv8_outputs,
)
from hisparse.kernels.reference.invariants_single import check_single_step
from hisparse.kernels.reference.occurrences import build_view
from hisparse.kernels.reference.snapshot import Snapshot, snapshot
from hisparse.kernels.reference.violation import Report, Violation

__all__ = ["Violation", "Snapshot", "snapshot", "check_multi_step", "check_single_step"]


def check_multi_step(*, inputs: Mapping, before: Snapshot, after: Snapshot) -> list[Violation]:
    """All violations of invariants 1-8 by one multi-step call (see module doc); [] when none.

    ``inputs`` are the op's kwargs (only arguments the op never writes are read from it);
    ``before``/``after`` are ``snapshot(inputs)`` taken around the call.
    """
    view = build_view(inputs, before, after)
    rep = Report()
    inv1_data(view, inputs, after, rep)
    inv2_dedup(view, rep)
    inv3_counts(view, before, after, rep)
    inv4_plan(view, after, rep)
    inv5_rows(view, before, after, rep)
    inv6_index(view, after, rep)
    inv7_residency(view, after, rep)
    inv8_outputs(view, after, rep)
    return rep.items
