"""CPU copies of what a swap mutates, taken before and after a call, for the invariant checker.

The op mutates its arguments in place, so the checker cannot read "before" from the kwargs after
the call: ``snapshot(inputs)`` clones the slot tables, the multi-step state (or the single-step
``lru_slots``), the outputs and the plan, plus the device-buffer rows named by the outputs and the
plan (not the whole buffer: at batch 64 that is ~300 MB, the referenced rows a third of it).
Inputs the op never writes (top-k, seq_lens, host tables and rows) are read from ``inputs`` itself.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from hisparse.kernels.reference.bytes import as_rows

_STATE_FIELDS = ("hash_index", "ref_epochs", "clock", "counters", "scratch_locs")


@dataclass(frozen=True)
class Snapshot:
    tokens: torch.Tensor  # device_buffer_tokens
    locs: torch.Tensor  # device_buffer_locs
    out: torch.Tensor  # top_k_device_locs
    state: dict[str, torch.Tensor] | None  # multi-step: _STATE_FIELDS
    lru_slots: torch.Tensor | None  # single-step
    miss_src: torch.Tensor | None
    miss_dst: torch.Tensor | None
    miss_count: torch.Tensor | None
    row_ids: torch.Tensor  # sorted distinct device rows captured
    row_data: torch.Tensor  # uint8 [len(row_ids), item_size_bytes]

    def rows(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(bytes [n, item], captured mask [n]) of device rows ``ids`` as they were at the snapshot."""
        ids = ids.to(torch.int64)
        if self.row_ids.numel() == 0:
            return torch.zeros((ids.numel(), self.row_data.shape[1]), dtype=torch.uint8), torch.zeros_like(ids, dtype=torch.bool)
        pos = torch.searchsorted(self.row_ids, ids).clamp(max=self.row_ids.numel() - 1)
        return gather_rows(self.row_data, pos), self.row_ids[pos] == ids


def gather_rows(rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """rows[index] for uint8 [n, item] rows, moved as the widest word dividing the item (8x fewer
    elements for the usual 576-byte items: the data check's main cost)."""
    item = rows.shape[1]
    for dtype, size in ((torch.int64, 8), (torch.int32, 4), (torch.int16, 2)):
        if item % size == 0 and rows.is_contiguous():
            return rows.view(dtype).index_select(0, index.to(rows.device)).view(torch.uint8)
    return rows.index_select(0, index.to(rows.device))


def _cpu(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().to("cpu", copy=True)


def _plan_rows(miss_dst: torch.Tensor, miss_count: torch.Tensor) -> torch.Tensor:
    rows = min(miss_dst.shape[0], miss_count.shape[0])
    counts = miss_count[:rows].to(torch.int64).clamp(0, miss_dst.shape[1])
    live = torch.arange(miss_dst.shape[1]).unsqueeze(0) < counts.unsqueeze(1)
    return miss_dst[:rows].to(torch.int64)[live]


def snapshot(inputs: Mapping[str, object]) -> Snapshot:
    """Clone to CPU what the swap (multi-step or single-step) may change; takes the op's kwargs."""
    out = _cpu(inputs["top_k_device_locs"])
    plan = [_cpu(inputs.get(k)) for k in ("miss_src", "miss_dst", "miss_count")]
    wanted = [out.reshape(-1).to(torch.int64)]
    if plan[1] is not None and plan[2] is not None:
        wanted.append(_plan_rows(plan[1], plan[2]))
    rows_all = as_rows(inputs["device_buffer"], inputs["item_size_bytes"])
    ids = torch.unique(torch.cat(wanted))
    ids = ids[(ids >= 0) & (ids < rows_all.shape[0])]
    state = inputs.get("state")
    return Snapshot(
        tokens=_cpu(inputs["device_buffer_tokens"]),
        locs=_cpu(inputs["device_buffer_locs"]),
        out=out,
        state=None if state is None else {k: _cpu(getattr(state, k)) for k in _STATE_FIELDS},
        lru_slots=_cpu(inputs.get("lru_slots")),
        miss_src=plan[0], miss_dst=plan[1], miss_count=plan[2],
        row_ids=ids,
        row_data=gather_rows(rows_all, ids).cpu(),
    )
