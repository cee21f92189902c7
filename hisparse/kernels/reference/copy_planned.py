"""Pure-PyTorch planned copy (docs/semantics.md §2.6): replay a miss plan recorded by a swap.

Shared-index ("skip") layers reuse the anchor layer's slot table, so they only need the anchor's
host->device copies, into their own KV buffer: rows ``r < num_real_reqs[0]``, entries
``[0, miss_count[r])``, ``device_buffer[miss_dst[r, j]] <- host_cache[miss_src[r, j]]``. An entry
whose src or dst is negative ("no row": the swap found no host row or no victim row) is skipped, as
the kernel does.
"""
from __future__ import annotations

import torch

from hisparse.kernels.reference.bytes import copy_rows
from hisparse.kernels.signature import Bound, keyword_op
from hisparse.kernels.validation.copy_planned import check_copy_planned_contract


@keyword_op("copy_planned")
def copy_planned(kw: Bound) -> int:
    """Copy every planned row (byte-exact, any item size); returns the number of rows copied
    (entries with a negative row are skipped and not counted)."""
    check_copy_planned_contract(**kw)
    n = int(kw.num_real_reqs[0])
    counts = kw.miss_count[:n].cpu().to(torch.int64)
    used = int(counts.max()) if n > 0 else 0
    # (request, miss) order, as the kernel's flattened round-robin walk enumerates them.
    live = torch.arange(used).unsqueeze(0) < counts.unsqueeze(1)
    src = kw.miss_src[:n, :used].cpu().to(torch.int64)[live]
    dst = kw.miss_dst[:n, :used].cpu().to(torch.int64)[live]
    keep = (src >= 0) & (dst >= 0)
    src, dst = src[keep], dst[keep]
    copy_rows(kw.host_cache, src, kw.device_buffer, dst, kw.item_size_bytes)
    return int(src.numel())
