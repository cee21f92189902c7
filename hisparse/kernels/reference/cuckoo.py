"""Hot-buffer lookup and the two-bank cuckoo index of the multi-step state (docs/semantics.md §3.5).

``hot_lookup`` is vectorised over requests and tokens and is shared by the reference and the
invariant checker: whether a token is "resident" is defined by this lookup, on the state as it was
before the call. ``CuckooRow`` edits one request's banks with plain Python ints, in the order the
reference commits misses (a few thousand inserts per call: list access is far cheaper than
element-wise tensor ops).
"""
from __future__ import annotations

import torch

from hisparse.kernels.limits import MAX_KICKS

HASH_DELETED = -2
_MULT = 2654435761
_U32 = 0xFFFFFFFF


# The two bank hashes and the entry layout; the kernels compute the same bits (cuckoo.cuh).

def primary_hash(token: torch.Tensor, hash_size: int) -> torch.Tensor:
    """Bank-0 slot: (uint32(t) * 2654435761) & (H-1), vectorised (int64 arithmetic, same bits as the kernel)."""
    return ((token.to(torch.int64) & 0xFFFFFFFF) * 2654435761 & 0xFFFFFFFF) & (hash_size - 1)


def secondary_hash(token: torch.Tensor, hash_size: int) -> torch.Tensor:
    """Bank-1 slot: murmur3 finalizer of uint32(t), & (H-1)."""
    x = token.to(torch.int64) & 0xFFFFFFFF
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x = x ^ (x >> 16)
    return x & (hash_size - 1)


def pack_entry(token: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
    return (slot.to(torch.int64) << 32) | (token.to(torch.int64) & 0xFFFFFFFF)


def _bank_slots(entries: torch.Tensor, tokens: torch.Tensor, slot_tokens: torch.Tensor, hot: int) -> torch.Tensor:
    """Slot named by each bank entry when it is live and still true (slot < HOT holds the token), else -1."""
    slot = entries >> 32
    in_range = (entries >= 0) & ((entries & _U32) == (tokens & _U32)) & (slot < hot)
    held = slot_tokens.gather(1, slot.clamp(0, hot - 1))
    return torch.where(in_range & (held == tokens), slot, torch.full_like(slot, -1))


def _linear_scan(tokens: torch.Tensor, slot_tokens: torch.Tensor) -> torch.Tensor:
    """Lowest slot holding each token (what a linear scan finds first), -1 if none. One request."""
    sorted_tok, order = torch.sort(slot_tokens, stable=True)
    pos = torch.searchsorted(sorted_tok, tokens).clamp(max=sorted_tok.numel() - 1)
    found = sorted_tok[pos] == tokens
    return torch.where(found, order[pos], torch.full_like(tokens, -1))


def hot_lookup(tokens: torch.Tensor, slot_tokens: torch.Tensor, banks: torch.Tensor, degraded: torch.Tensor) -> torch.Tensor:
    """Hot slot of each token or -1, per §3.5: identity fast path, bank 0, bank 1, then (degraded
    requests only) a linear scan.

    tokens int64 [n, T] (negative tokens are never found), slot_tokens [n, HOT] (the hot part of
    device_buffer_tokens), banks int64 [n, 2, H], degraded bool [n].
    """
    tokens = tokens.to(torch.int64)
    slot_tokens = slot_tokens.to(torch.int64)
    hot, h = slot_tokens.shape[1], banks.shape[2]
    live = tokens >= 0
    ident = live & (tokens < hot)
    ident &= slot_tokens.gather(1, tokens.clamp(0, hot - 1)) == tokens
    found = torch.where(ident, tokens, torch.full_like(tokens, -1))
    for bank, fn in ((0, primary_hash), (1, secondary_hash)):
        need = live & (found < 0)
        if not bool(need.any()):
            break
        entries = banks[:, bank].gather(1, fn(tokens, h))
        found = torch.where(need, _bank_slots(entries, tokens, slot_tokens, hot), found)
    for row in torch.nonzero(degraded.to(torch.bool)).flatten().tolist():
        need = live[row] & (found[row] < 0)
        if bool(need.any()):
            found[row] = torch.where(need, _linear_scan(tokens[row], slot_tokens[row]), found[row])
    return found


def h1(token: int, hash_size: int) -> int:
    return ((token & _U32) * _MULT & _U32) & (hash_size - 1)


def h2(token: int, hash_size: int) -> int:
    x = token & _U32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _U32
    x ^= x >> 15
    x = (x * 0x846CA68B) & _U32
    x ^= x >> 16
    return x & (hash_size - 1)


def pack(token: int, slot: int) -> int:
    return (slot << 32) | (token & _U32)


def entry_token(entry: int) -> int:
    """Token of a live entry (tokens are non-negative int32, so the low 32 bits are the token)."""
    return entry & _U32


class CuckooRow:
    """One request's two banks as Python lists, with write-back of the touched positions."""

    def __init__(self, hash_index: torch.Tensor, rid: int):
        self._index, self._rid = hash_index, rid
        self.size = hash_index.shape[2]
        self.banks = [hash_index[rid, 0].tolist(), hash_index[rid, 1].tolist()]
        self._dirty: list[set[int]] = [set(), set()]

    def _hash(self, bank: int, token: int) -> int:
        return h1(token, self.size) if bank == 0 else h2(token, self.size)

    def _put(self, bank: int, pos: int, entry: int) -> None:
        self.banks[bank][pos] = entry
        self._dirty[bank].add(pos)

    def erase(self, token: int, slot: int) -> None:
        """Mark the exact entry (token, slot) deleted, bank 0 first (a no-op when absent)."""
        want = pack(token, slot)
        for bank in (0, 1):
            pos = self._hash(bank, token)
            if self.banks[bank][pos] == want:
                self._put(bank, pos, HASH_DELETED)
                return

    def insert(self, token: int, slot: int) -> bool:
        """§3.5 insert: same token or empty bucket in bank 0, then bank 1, then up to 64 kicks
        alternating banks from bank 0. False when an entry had to be dropped (caller degrades)."""
        entry = pack(token, slot)
        for bank in (0, 1):
            pos = self._hash(bank, token)
            old = self.banks[bank][pos]
            if old < 0 or entry_token(old) == token:
                self._put(bank, pos, entry)
                return True
        carried, bank = entry, 0
        for _ in range(MAX_KICKS):
            pos = self._hash(bank, entry_token(carried))
            displaced = self.banks[bank][pos]
            self._put(bank, pos, carried)
            if displaced < 0:
                return True
            carried, bank = displaced, bank ^ 1
        return False

    def write_back(self) -> None:
        for bank in (0, 1):
            if self._dirty[bank]:
                pos = sorted(self._dirty[bank])
                vals = [self.banks[bank][p] for p in pos]
                dev = self._index.device
                self._index[self._rid, bank, torch.tensor(pos, device=dev)] = torch.tensor(
                    vals, dtype=torch.int64, device=dev)
                self._dirty[bank].clear()


__all__ = ["CuckooRow", "hot_lookup", "h1", "h2", "pack", "MAX_KICKS", "HASH_DELETED"]
