"""Random top-k rows for the kernel and reference tests, made to satisfy the top-k contract both
swaps share (hisparse/kernels/validation/common.py check_top_k_rows; docs/design.md)."""
from __future__ import annotations

import torch


def within_contract(row: torch.Tensor, seq_len: int, limit: int | None = None) -> torch.Tensor:
    """``row`` (one request and step) with what the contract forbids made padding: entries outside
    [0, limit) (default seq_len; a single-step short row addresses its slot table, hot + page),
    entries from index seq_len on, and repeats of an earlier entry become -1."""
    row = row.clone().to(torch.int64)
    row[(row < 0) | (row >= (seq_len if limit is None else limit))] = -1
    row[max(seq_len, 0):] = -1
    n = row.numel()
    vals, inv = torch.unique(row, return_inverse=True)
    first = torch.full((vals.numel(),), n, dtype=torch.int64).scatter_reduce(0, inv, torch.arange(n), reduce="amin")
    row[(torch.arange(n) != first[inv]) & (row >= 0)] = -1
    return row
