"""Every size limit of the kernels, in one place (torch-free, so the CLI prunes cases without torch).

The C++ entry points check the same numbers (csrc/swap_multi.cuh, csrc/swap_single.cuh);
tests/kernels/test_limits.py reads those sources and holds them to these values. Edit a limit here,
then in the .cuh named next to it; the test says which one disagrees.
"""
from __future__ import annotations

MAX_STEPS = 4  # speculative steps per multi-step call (kMaxSteps, swap_multi.cuh)
MAX_STEPS_X_TOP_K = 8192  # top-k occurrences per request per call (kMaxOccurrences, swap_multi.cuh)
MAX_HOT_BUFFER_SIZE = 32768  # hot slots of the multi-step swap (kMaxHot, swap_multi.cuh)
MAX_LRU_HOT_BUFFER_SIZE = 32767  # the single-step swap's lru_slots is int16 (docs/semantics.md §2.3)
MAX_ITEM_SIZE_BYTES = 1 << 20  # (row, 16-byte word) indices of a copy fit in 32 bits (kMaxItemBytes)
MIN_SCRATCH_CAPACITY = 1024  # below this, direct-overflow copies in the commit dominate (upstream sizing)
MAX_TOKEN_POSITIONS = 1 << 31  # tokens are packed into 32 bits of a hash entry
