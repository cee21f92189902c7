// Multi-row copies: many rows' loads in flight at once, built on the primitives of copy.cuh.
//
// Why: a zero-copy read of pinned host memory costs ~1-2 us of PCIe latency, so bandwidth is set by
// the number of reads in flight. warp_copy_item moves one row per warp at a time (a 576 B row is 36
// 16-byte words: ~1 load per lane), so a warp owning several rows pays one round trip per row. Here
// the rows of a CTA (or of a warp) are flattened into (row, 16-byte word) pairs spread over all its
// threads, each thread issuing kInFlight loads before its first store: n rows cost about
// ceil(n * words / (threads * kInFlight)) round trips instead of n. On the H200 of docs/semantics.md §H1 a
// flat 16-byte gather of this kind reached 49.2 GB/s (576 B rows) against 40.6 GB/s for warp-per-row.
//
// The flat path needs every row start 16-B aligned: item_size_bytes % 16 == 0 and both bases 16-B
// aligned (576, 656, 1152, 512 B items in torch allocations). Otherwise each row goes through
// warp_copy_item (byte-exact for any size and alignment), one warp per row, with 2 words in flight
// per lane: its 4-in-flight variant made the 1024-thread commit kernel spill (ptxas, sm_90), and
// these items are off the fast path anyway. No tvm/torch here.
#pragma once

#include <cstdint>

#include "hisparse/copy.cuh"

namespace hisparse {

__device__ __forceinline__ bool rows_are_16b_aligned(const void* src_base, const void* dst_base, uint32_t item_size_bytes) {
  const uintptr_t bases = reinterpret_cast<uintptr_t>(src_base) | reinterpret_cast<uintptr_t>(dst_base);
  return (item_size_bytes & 15u) == 0 && (bases & 15u) == 0;
}

// CTA-wide copy of rows src_rows[i] -> dst_rows[i], i < count (lists in shared memory, written
// before a __syncthreads). Every thread of the CTA must call it. words * count must fit in 32 bits
// (the host entry bounds item_size_bytes).
template <int kThreads, int kInFlight>
__device__ __forceinline__ void block_copy_rows(const void* src_base, void* dst_base, uint32_t item_size_bytes,
                                                const int64_t* src_rows, const int32_t* dst_rows, uint32_t count) {
  if (count == 0) return;
  const uint32_t tid = threadIdx.x;
  if (rows_are_16b_aligned(src_base, dst_base, item_size_bytes)) {
    const uint32_t words = item_size_bytes >> 4;
    const uint32_t total = words * count;
    const auto* src = static_cast<const uint8_t*>(src_base);
    auto* dst = static_cast<uint8_t*>(dst_base);
    for (uint32_t base = tid; base < total; base += kThreads * kInFlight) {
      uint4 v[kInFlight];
      uint4* d[kInFlight];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        const uint32_t i = base + j * kThreads;
        if (i < total) {
          const uint32_t r = i / words;
          const uint32_t w = i - r * words;
          const int64_t off = static_cast<int64_t>(w) << 4;
          v[j] = load_nc(reinterpret_cast<const uint4*>(src + src_rows[r] * static_cast<int64_t>(item_size_bytes) + off));
          d[j] = reinterpret_cast<uint4*>(dst + static_cast<int64_t>(dst_rows[r]) * item_size_bytes + off);
        }
      }
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        if (base + j * kThreads < total) store_cg(d[j], v[j]);
      }
    }
  } else {
    const uint32_t lane = tid % kWarpSize;
    for (uint32_t r = tid / kWarpSize; r < count; r += kThreads / kWarpSize) {
      warp_copy_item<2>(row_ptr(src_base, src_rows[r], item_size_bytes), row_ptr(dst_base, dst_rows[r], item_size_bytes),
                        item_size_bytes, lane);
    }
  }
}

// Position of the n-th (0-based) set bit of mask; needs n < popc(mask). Binary search on popc
// (largest p with popc(mask & ((1 << p) - 1)) <= n), so it does not depend on __fns conventions.
__device__ __forceinline__ uint32_t nth_set_bit(uint32_t mask, uint32_t n) {
  uint32_t pos = 0;
#pragma unroll
  for (uint32_t step = 16; step > 0; step >>= 1) {
    if (static_cast<uint32_t>(__popc(mask & ((1u << (pos + step)) - 1u))) <= n) pos += step;
  }
  return pos;
}

// Warp-wide copy: each lane may own one row (has_row, src_row -> dst_row); all rows of the warp are
// copied together. All 32 lanes must call it (it uses full-mask shuffles).
template <int kInFlight>
__device__ __forceinline__ void warp_copy_rows(const void* src_base, void* dst_base, uint32_t item_size_bytes,
                                               bool has_row, int64_t src_row, int32_t dst_row, uint32_t lane) {
  constexpr unsigned kFull = 0xFFFFFFFFu;
  const unsigned mask = __ballot_sync(kFull, has_row);
  if (mask == 0) return;
  if (rows_are_16b_aligned(src_base, dst_base, item_size_bytes)) {
    const uint32_t count = __popc(mask);
    // owner[k] = lane of the k-th row; lane k keeps it and the copy loop reads it with a shuffle.
    const uint32_t owner_of_rank = lane < count ? nth_set_bit(mask, lane) : 0;
    const uint32_t words = item_size_bytes >> 4;
    const uint32_t total = words * count;
    const auto* src = static_cast<const uint8_t*>(src_base);
    auto* dst = static_cast<uint8_t*>(dst_base);
    // Warp-uniform trip count: every lane runs every round so the shuffles see all 32 lanes.
    for (uint32_t base = 0; base < total; base += kWarpSize * kInFlight) {
      uint4 v[kInFlight];
      uint4* d[kInFlight];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        const uint32_t i = base + j * kWarpSize + lane;
        const uint32_t r = min(i, total - 1) / words;
        const uint32_t w = min(i, total - 1) - r * words;
        const int owner = static_cast<int>(__shfl_sync(kFull, owner_of_rank, static_cast<int>(r)));
        const int64_t s = __shfl_sync(kFull, src_row, owner);
        const int32_t t = __shfl_sync(kFull, dst_row, owner);
        const int64_t off = static_cast<int64_t>(w) << 4;
        if (i < total) {
          v[j] = load_nc(reinterpret_cast<const uint4*>(src + s * static_cast<int64_t>(item_size_bytes) + off));
          d[j] = reinterpret_cast<uint4*>(dst + static_cast<int64_t>(t) * item_size_bytes + off);
        }
      }
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        if (base + j * kWarpSize + lane < total) store_cg(d[j], v[j]);
      }
    }
  } else {
    for (unsigned m = mask; m != 0; m &= m - 1) {
      const int owner = __ffs(m) - 1;
      const int64_t s = __shfl_sync(kFull, src_row, owner);
      const int32_t t = __shfl_sync(kFull, dst_row, owner);
      warp_copy_item<2>(row_ptr(src_base, s, item_size_bytes), row_ptr(dst_base, t, item_size_bytes), item_size_bytes, lane);
    }
  }
}

}  // namespace hisparse
