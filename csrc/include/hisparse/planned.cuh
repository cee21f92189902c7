// Planned copy (docs/semantics.md §2.6): replay a recorded miss plan into another layer's KV buffer.
// Framework-free device code; host entry in csrc/copy_planned.cuh.
//
// The (request, miss) pairs of rows r < num_real_reqs[0], entries [0, miss_count[r]), are numbered in
// row-major order. With tiles 0 (the shared-layer replay) they are dealt round-robin to every warp of
// a small grid: pair q goes to global warp
// q % total_warps, which copies the whole item. Upstream measured 183 us -> 29 us at bs=100 with 2
// misses per request on H200 for this layout against warps striding within one request at a time,
// since a few misses per request otherwise leave most warps idle. The grid is small on purpose
// (default 8 CTAs): the copy runs on a side stream next to attention and should leave SMs free.
//
// Entries whose src or dst row lies outside its buffer (-1 = "no row") are skipped, as in the reference.
//
// Each warp walks the counts in windows of 32 rows (one per lane) and a warp-wide prefix sum, so it
// finds the row of each of its pairs with one ballot, with no global prefix array and no allocation.
//
// Request-major tasks (tiles >= 1; the single-step swap's grid copy): request r's entries are dealt
// over `tiles` tasks (entry j to task j % tiles), task t of request r is number r * tiles + t, and the
// grid takes the tasks in that order (CTA b: tasks b, b + gridDim.x, ...). The CTAs at work at one time
// then serve about gridDim.x / tiles consecutive requests, not all of them: in a decode step the GPU's
// translations of host addresses are cold, and a scattered gather pays per distinct host page at a
// rate set by how close together the pages in flight lie (the multi-step gather's request-major waves,
// csrc/swap_multi.cuh launch_gather). A task's valid entries are listed in shared memory and copied flat
// (block_copy_rows: all its rows' loads in flight at once).
#pragma once

#include <cstdint>

#include "hisparse/copy.cuh"
#include "hisparse/copy_rows.cuh"

namespace hisparse {

struct PlannedCopyParams {
  const int64_t* miss_src;  // [>=batch, width], row stride plan_stride
  const int32_t* miss_dst;  // same row stride
  const int32_t* miss_count;  // [batch]
  const int32_t* num_real_reqs;  // [1]
  const void* host_cache;
  void* device_buffer;
  int64_t plan_stride;
  int64_t width;  // usable plan columns; counts are clamped to [0, width] (the contract keeps them there)
  int64_t host_rows;    // rows of host_cache: a src outside [0, host_rows) is skipped
  int64_t device_rows;  // rows of device_buffer: a dst outside [0, device_rows) is skipped
  int64_t tiles;  // 0 = pairs round-robin over every warp; >= 1 = request-major tasks of this many per request
  int32_t batch;
  uint32_t item_size_bytes;
};

namespace planned_detail {

// Kept out of line for the same register reason as the swap kernel's copy (lru.cuh).
static __device__ __noinline__ void copy_pair(const void* src, void* dst, uint32_t n, uint32_t lane) {
  warp_copy_item<2>(src, dst, n, lane);
}

__device__ __forceinline__ int64_t warp_inclusive_scan(int64_t x, int lane) {
#pragma unroll
  for (int o = 1; o < kWarpSize; o <<= 1) {
    const int64_t y = __shfl_up_sync(0xFFFFFFFFu, x, o);
    if (lane >= o) x += y;
  }
  return x;
}

// Loads in flight per thread in a task's flat copy: a task is a few rows (~6 of 576 B at the serving
// miss rate, batch 64, 33 tiles), fewer words than the CTA has threads, so one round covers it.
constexpr int kTaskInFlight = 2;

// A row pair the replay copies: both rows inside their buffers (-1 = "no row"; anything else outside
// is skipped the same way, so a bad plan never writes outside device_buffer).
__device__ __forceinline__ bool pair_in_bounds(const PlannedCopyParams& p, int64_t src, int64_t dst) {
  return src >= 0 && src < p.host_rows && dst >= 0 && dst < p.device_rows;
}

template <int kBlockSize>
__device__ __forceinline__ void copy_request_major(const PlannedCopyParams& p, int32_t n_real) {
  __shared__ int64_t s_src[kBlockSize];
  __shared__ int32_t s_dst[kBlockSize];
  __shared__ uint32_t s_rows;
  const int64_t tiles = p.tiles;
  const int64_t tasks = static_cast<int64_t>(n_real) * tiles;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {  // block-uniform
    const int64_t r = task / tiles;
    const int64_t t = task - r * tiles;
    const int64_t cnt = min(max(static_cast<int64_t>(p.miss_count[r]), int64_t{0}), p.width);
    const int64_t mine = cnt > t ? (cnt - 1 - t) / tiles + 1 : 0;  // entries t, t + tiles, ...
    for (int64_t i0 = 0; i0 < mine; i0 += kBlockSize) {
      if (threadIdx.x == 0) s_rows = 0;
      __syncthreads();
      const int64_t i = i0 + threadIdx.x;
      if (i < mine) {
        const int64_t at = r * p.plan_stride + t + i * tiles;
        const int64_t src = p.miss_src[at];
        const int64_t dst = p.miss_dst[at];
        if (pair_in_bounds(p, src, dst)) {
          const uint32_t k = atomicAdd(&s_rows, 1u);
          s_src[k] = src;
          s_dst[k] = static_cast<int32_t>(dst);
        }
      }
      __syncthreads();
      block_copy_rows<kBlockSize, kTaskInFlight>(p.host_cache, p.device_buffer, p.item_size_bytes, s_src, s_dst,
                                                 s_rows);
      __syncthreads();  // the lists are rewritten by the next round
    }
  }
}

}  // namespace planned_detail

template <int kBlockSize>
__global__ void __launch_bounds__(kBlockSize) copy_planned_kernel(const __grid_constant__ PlannedCopyParams p) {
  static_assert(kBlockSize % kWarpSize == 0 && kBlockSize >= 32 && kBlockSize <= 1024,
                "block size: a multiple of 32 in [32, 1024]");
  using namespace planned_detail;
  constexpr int kWarps = kBlockSize / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t total_warps = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t gwarp = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  const int32_t n_real = min(max(*p.num_real_reqs, 0), p.batch);
  if (p.tiles > 0) {  // kernel-uniform
    copy_request_major<kBlockSize>(p, n_real);
    return;
  }

  int64_t done = 0;  // pairs in the windows before this one
  for (int32_t base = 0; base < n_real; base += kWarpSize) {
    const int32_t r = base + lane;
    const int64_t cnt = r < n_real ? min(max(static_cast<int64_t>(p.miss_count[r]), int64_t{0}), p.width) : 0;
    const int64_t incl = warp_inclusive_scan(cnt, lane);
    const int64_t window = __shfl_sync(0xFFFFFFFFu, incl, kWarpSize - 1);
    // First pair q >= done with q % total_warps == gwarp; the loop is warp-uniform.
    const int64_t first = done + ((gwarp - done % total_warps) + total_warps) % total_warps;
    for (int64_t q = first; q < done + window; q += total_warps) {
      const int64_t local = q - done;
      const int owner = __ffs(__ballot_sync(0xFFFFFFFFu, incl > local)) - 1;  // lane of q's row
      const int64_t before = __shfl_sync(0xFFFFFFFFu, incl - cnt, owner);
      const int64_t at = static_cast<int64_t>(base + owner) * p.plan_stride + (local - before);
      const int64_t src = p.miss_src[at];
      const int64_t dst = p.miss_dst[at];
      // -1 = "no row": a swap records it when a miss had no host row or found no victim row
      // (warp-uniform: the whole warp reads one pair).
      if (!pair_in_bounds(p, src, dst)) continue;
      copy_pair(row_ptr(p.host_cache, src, p.item_size_bytes), row_ptr(p.device_buffer, dst, p.item_size_bytes),
                p.item_size_bytes, lane);
    }
    done += window;
  }
}

}  // namespace hisparse
