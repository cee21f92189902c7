"""Every size limit of the kernels, in one place (torch-free, so the CLI prunes cases without torch).

The C++ entry points and device headers check the same numbers (named next to each limit);
tests/kernels/test_limits.py reads those sources and holds them to these values. Edit a limit here,
then in the .cuh named next to it; the test says which one disagrees.
"""
from __future__ import annotations

# Multi-step swap (csrc/swap_multi.cuh).
MAX_STEPS = 4  # speculative steps per multi-step call (kMaxSteps)
MAX_STEPS_X_TOP_K = 8192  # top-k occurrences per request per call (kMaxOccurrences)
MAX_HOT_BUFFER_SIZE = 32768  # hot slots of the multi-step swap (kMaxHot)
MAX_MISS_TABLE = 16384  # miss hash table slots, 14-bit positions in miss_order (kMaxMissTable)
MAX_ITEM_SIZE_BYTES = 1 << 20  # (row, 16-byte word) indices of a copy fit in 32 bits (kMaxItemBytes)
MAX_MULTI_BATCH = 1 << 24  # batch rows of one multi-step call (the entry's bs check)
MAX_TOKEN_POSITIONS = 1 << 31  # tokens are packed into 32 bits of a hash entry (the max_len check)
MIN_SCRATCH_CAPACITY = 1024  # below this, direct-overflow copies in the commit dominate (upstream sizing)
MAX_KICKS = 64  # cuckoo kick chain bound before a request degrades (kMaxKicks, csrc/include/hisparse/spec_common.cuh)

# Single-step swap (csrc/swap_single.cuh).
MAX_LRU_HOT_BUFFER_SIZE = 32767  # lru_slots is int16 (docs/semantics.md §2.3; the entry's HOT check)

# Every copying entry (csrc/host/entry_checks.h check_kv_buffers): the item size is a 32-bit value.
MAX_COPY_ITEM_SIZE_BYTES = 0x7FFFFFFF

# Planned copy and gather (csrc/copy_planned.cuh, csrc/gather_floor.cuh).
MAX_GRID_BLOCKS = 65535  # num_blocks
MAX_GATHER_BLOCK_SIZE = 512  # threads per CTA, register budget for 8 loads in flight (kGatherMaxBlock, gather.cuh)
