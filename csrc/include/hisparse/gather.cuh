// Bare gather of n rows, host row src_rows[i] -> device row dst_rows[i]: the in-run physical floor a
// swap is reported against (docs/semantics.md §H1, §H4). Framework-free device code; host entry in
// csrc/gather_floor.cuh.
//
// Fast path (rows W-aligned on both sides, W = copy.cuh's flat_word_bytes: the widest of 16, 8, 4
// bytes dividing the item size and both bases): each CTA takes a contiguous run of rows and gathers
// their W-byte words flat over its threads, kLoads per thread per round, issuing all kLoads zero-copy
// loads before the first store. The swaps' copies (copy_rows.cuh) take the same words, so the floor
// of a 584 B (8-byte words) or 100 B (4-byte words) case is the same structure as the kernels' own.
// Measured on H200 (576 B rows, 50,048 rows): 49.2 GB/s for this shape vs 40.6 GB/s for a warp-per-row gather, because the number
// of PCIe reads in flight, not the instruction count, sets the bandwidth; more warps than that did
// not help (2112 x 256 warp-gather blocks were slower than 528).
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
  // CTA c copies the contiguous rows [c * per, (c + 1) * per) of the list: a swap's copy list is
  // grouped by request, so each SM reads few requests' host regions at a time. (A grid-stride
  // interleave over the whole list put every SM on rows of all requests at once: 27-30 GB/s on
  // scattered rows of a 2.8 GB pool against 42-49 GB/s request by request, docs/perf-notes.md.)
  const uint32_t cpr = p.chunks_per_row;
  const uint32_t per = static_cast<uint32_t>((p.n + gridDim.x - 1) / gridDim.x);
  const uint32_t first = blockIdx.x * per;
  if (first >= p.n) return;
  const uint32_t rows = min(per, static_cast<uint32_t>(p.n - first));
  const uint32_t total = rows * cpr;
  const int64_t* src_rows = p.src_rows + first;
  const int32_t* dst_rows = p.dst_rows + first;
  for (uint32_t base = threadIdx.x; base < total; base += blockDim.x * kLoads) {
    // All kLoads host loads go out before the first store; only the loaded values stay live (the
    // destination is recomputed after, from a device-side index that is cheap to re-read).
    W v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const uint32_t c = base + j * blockDim.x;
      if (c < total) {
        const uint32_t row = c / cpr;
        v[j] = load_nc(reinterpret_cast<const W*>(row_ptr(p.host_cache, src_rows[row], p.item_size_bytes)) +
                       (c - row * cpr));
      }
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const uint32_t c = base + j * blockDim.x;
      if (c < total) {
        const uint32_t row = c / cpr;
        store_cg(reinterpret_cast<W*>(row_ptr(p.device_buffer, dst_rows[row], p.item_size_bytes)) + (c - row * cpr),
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
