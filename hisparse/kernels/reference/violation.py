"""What the invariant checker reports, and a collector that bounds the report's size."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch

# A broken kernel can fail every entry of every request; a few examples per (invariant, request)
# say enough, and keep a report of 500k entries from taking longer than the check itself.
MAX_ENTRIES_PER_REQUEST = 8


@dataclass(frozen=True)
class Violation:
    """One broken invariant.

    ``invariant``: "1".."8" (docs/semantics.md §8.2, adapted; see hisparse.kernels.reference.invariants).
    ``request``: batch row, or None for a request slot that is not in the batch.
    ``entry``: (step, k) of an output entry; (u,) of a plan entry; (slot,) of a hot slot; (loc,) of
    a device row; None when the invariant is about a whole request (a count).
    """

    invariant: str
    request: int | None
    entry: tuple | None
    detail: str


class Report:
    def __init__(self) -> None:
        self.items: list[Violation] = []
        self._per: Counter = Counter()

    def add(self, invariant: str, request: int | None, entry: tuple | None, detail: str) -> None:
        key = (invariant, request)
        self._per[key] += 1
        if self._per[key] <= MAX_ENTRIES_PER_REQUEST:
            self.items.append(Violation(invariant, request, entry, detail))
        elif self._per[key] == MAX_ENTRIES_PER_REQUEST + 1:
            self.items.append(Violation(invariant, request, None, "more violations of this invariant left out"))

    def entries(
        self,
        invariant: str,
        mask: torch.Tensor,
        rows: list[int],
        top_k: int,
        detail: Callable[[int, int], str],
    ) -> None:
        """One violation per True of ``mask`` [len(rows), T] (row i = batch row rows[i]), entry (s, k)."""
        if not bool(mask.any()):
            return
        for i in torch.nonzero(mask.any(dim=1)).flatten().tolist():
            # the first few suffice: add() keeps MAX_ENTRIES_PER_REQUEST and notes the rest
            for pos in torch.nonzero(mask[i]).flatten()[: MAX_ENTRIES_PER_REQUEST + 1].tolist():
                self.add(invariant, rows[i], (pos // top_k, pos % top_k), detail(i, pos))
