// Multi-row copies: many rows' loads in flight at once, built on the primitives of copy.cuh.
//
// Why: a zero-copy read of pinned host memory costs ~1-2 us of PCIe latency, so bandwidth is set by
// the number of reads in flight. warp_copy_item moves one row per warp at a time (a 576 B row is 36
// 16-byte words: ~1 load per lane), so a warp owning several rows pays one round trip per row. Here
// the rows of a CTA are flattened into (row, word) pairs spread over all its threads, each thread
// issuing its loads before its first store: n rows cost about ceil(n * words / (threads * loads))
// round trips instead of n. On the H200 of docs/semantics.md §H1 a flat 16-byte gather of this kind
// reached 49.2 GB/s (576 B rows) against 40.6 GB/s for warp-per-row.
//
// The word W is copy.cuh's flat_word_bytes: 576, 656, 1152, 512 B rows move as 16-byte words, 584 B
// (= 73 * 8) as 8-byte words, 100 B (= 25 * 4) as 4-byte words (before, every size that is not a
// multiple of 16 went warp per row, one round trip per row). kScaleNarrow: loads_for_word(kInFlight, W)
// loads per thread for narrower words (the same bytes in flight, the same registers for the values;
// the gather), else kInFlight of any width (the commit, whose 64 registers per thread spill more with
// the unrolled address arithmetic of 16 loads). Other sizes (odd, 2 mod 4) go through warp_copy_item
// (byte-exact for any size and alignment), one warp per row, 2 words in flight per lane.
// The destination address is recomputed at the store from the shared-memory lists instead of kept in
// registers across the loads: the 1024-thread commit kernel has 64 registers per thread. No tvm/torch here.
#pragma once

#include <cstdint>

#include "hisparse/copy.cuh"

namespace hisparse {

// Flat body of block_copy_rows with W-byte words (every row start W-aligned on both sides).
template <typename W, int kThreads, int kLoads>
__device__ __forceinline__ void block_copy_rows_as(const void* src_base, void* dst_base, uint32_t item_size_bytes,
                                                   const int64_t* src_rows, const int32_t* dst_rows, uint32_t count) {
  const uint32_t words = item_size_bytes / sizeof(W);
  const uint32_t total = words * count;
  const auto* src = static_cast<const W*>(src_base);
  auto* dst = static_cast<W*>(dst_base);
  for (uint32_t base = threadIdx.x; base < total; base += kThreads * kLoads) {
    W v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const uint32_t i = base + j * kThreads;
      if (i < total) {
        const uint32_t r = i / words;
        v[j] = load_nc(src + src_rows[r] * static_cast<int64_t>(words) + (i - r * words));
      }
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const uint32_t i = base + j * kThreads;
      if (i < total) {
        const uint32_t r = i / words;
        store_cg(dst + static_cast<int64_t>(dst_rows[r]) * words + (i - r * words), v[j]);
      }
    }
  }
}

// CTA-wide copy of rows src_rows[i] -> dst_rows[i], i < count (lists in shared memory, written
// before a __syncthreads). Every thread of the CTA must call it. kInFlight counts 16-byte loads per
// thread; words * count must fit in 32 bits (the host entry bounds item_size_bytes).
template <int kThreads, int kInFlight, bool kScaleNarrow = true>
__device__ __forceinline__ void block_copy_rows(const void* src_base, void* dst_base, uint32_t item_size_bytes,
                                                const int64_t* src_rows, const int32_t* dst_rows, uint32_t count) {
  if (count == 0) return;
  switch (flat_word_bytes(src_base, dst_base, item_size_bytes)) {
    case 16:
      block_copy_rows_as<uint4, kThreads, kInFlight>(src_base, dst_base, item_size_bytes, src_rows, dst_rows, count);
      return;
    case 8:
      block_copy_rows_as<uint2, kThreads, kScaleNarrow ? loads_for_word(kInFlight, 8) : kInFlight>(
          src_base, dst_base, item_size_bytes, src_rows, dst_rows, count);
      return;
    case 4:
      block_copy_rows_as<uint32_t, kThreads, kScaleNarrow ? loads_for_word(kInFlight, 4) : kInFlight>(
          src_base, dst_base, item_size_bytes, src_rows, dst_rows, count);
      return;
    default: {
      const uint32_t lane = threadIdx.x % kWarpSize;
      for (uint32_t r = threadIdx.x / kWarpSize; r < count; r += kThreads / kWarpSize) {
        warp_copy_item<2>(row_ptr(src_base, src_rows[r], item_size_bytes), row_ptr(dst_base, dst_rows[r], item_size_bytes),
                          item_size_bytes, lane);
      }
    }
  }
}

}  // namespace hisparse
