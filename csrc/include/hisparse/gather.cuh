// Bare gather of n rows, host row src_rows[i] -> device row dst_rows[i]: the in-run physical floor a
// swap is reported against (docs/semantics.md §H1, §H4). Framework-free device code; host entry in
// csrc/gather_floor.cuh.
//
// Fast path (rows W-aligned on both sides, W = copy.cuh's flat_word_bytes: the widest of 16, 8, 4
// bytes dividing the item size and both bases): the W-byte words of all rows are dealt over the whole
// grid in waves (word c of the list goes to thread c mod the grid's threads), kLoads per thread per
// wave, all kLoads zero-copy loads issued before the first store. So at any time the grid's loads cover
// one window of consecutive rows of the list; on a list sorted by host address (floors.py passes one)
// that is one stretch of the host pool. Why: with the GPU's translations of host addresses cold (a
// decode step), a scattered gather pays per distinct 4 KiB host page, at a rate set by how close
// together the pages in flight are. Measured on the H200 (scripts/probe_translation.py, docs/perf-notes.md
// 2026-12-04; 54.6k rows of 576 B scattered over 3 GB pools, 8 pools in turn), sorted rows: waves of one
// load per thread 805 us cold / 596 warm, of 4 loads 873 / 593, against 1143 / 596 for the former
// shape (each CTA one contiguous run of the list). The swaps' copies (copy_rows.cuh) take the same
// words, so the floor of a 584 B (8-byte words) or 100 B (4-byte words) case is the same structure as
// the kernels' own.
//
// Fallback (any other size or alignment: odd sizes, an odd host base): warp per row with
// warp_copy_item, byte-exact.
#pragma once

#include <cstdint>

#include "hisparse/copy.cuh"

namespace hisparse {

struct GatherParams {
  const int64_t* src_rows;  // [n] host rows
  const int32_t* dst_rows;  // [n] device rows
  const void* host_cache;
  void* device_buffer;
  int64_t n;
  uint32_t item_size_bytes;
  uint32_t chunks_per_row;  // item_size_bytes / sizeof(W) on the fast path
  uint32_t total_chunks;    // n * chunks_per_row (the host checks it fits in 32 bits)
};

// Largest block the gather kernels accept: 512 threads leave up to 128 registers per thread, room
// for 8 loads in flight without spills.
constexpr int kGatherMaxBlock = 512;

template <typename W, int kLoads>
__global__ void __launch_bounds__(kGatherMaxBlock) gather_flat_kernel(const __grid_constant__ GatherParams p) {
  static_assert(kLoads >= 1 && kLoads <= 16, "loads in flight: 1..16");
  const uint32_t cpr = p.chunks_per_row;
  const uint32_t total = p.total_chunks;  // < 2^31 (host check), so base + j * stride never wraps
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t base = blockIdx.x * blockDim.x + threadIdx.x; base < total; base += stride * kLoads) {
    // All kLoads host loads go out before the first store; only the loaded values stay live (the
    // destination is recomputed after, from a device-side index that is cheap to re-read).
    W v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const uint32_t c = base + j * stride;
      if (c < total) {
        const uint32_t row = c / cpr;
        v[j] = load_nc(reinterpret_cast<const W*>(row_ptr(p.host_cache, p.src_rows[row], p.item_size_bytes)) +
                       (c - row * cpr));
      }
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const uint32_t c = base + j * stride;
      if (c < total) {
        const uint32_t row = c / cpr;
        store_cg(reinterpret_cast<W*>(row_ptr(p.device_buffer, p.dst_rows[row], p.item_size_bytes)) + (c - row * cpr),
                 v[j]);
      }
    }
  }
}

// Fallback: byte-exact, any size/alignment. Two loads in flight per lane whatever kLoads is (the
// narrow-word paths of warp_copy_item multiply it, and more spilled registers at 8).
__global__ void __launch_bounds__(kGatherMaxBlock) gather_warp_kernel(const __grid_constant__ GatherParams p) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarpSize);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
       i < p.n; i += warps) {
    warp_copy_item<2>(row_ptr(p.host_cache, p.src_rows[i], p.item_size_bytes),
                      row_ptr(p.device_buffer, p.dst_rows[i], p.item_size_bytes), p.item_size_bytes, lane);
  }
}

}  // namespace hisparse
