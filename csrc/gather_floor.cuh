// Host entry of the bare gather (device code: hisparse/gather.cuh), the in-run physical floor.
//
// Picks the flat gather of 16-, 8- or 4-byte words (flat_word_bytes: the widest that divides the item
// size and both bases), the byte-exact warp-per-row gather otherwise. num_blocks <= 0 means one CTA
// per SM for the flat gather and 4 per SM for the warp gather (528 on a 132-SM H200: the best
// warp-gather grid measured in docs/semantics.md §H1); the grid never exceeds what the rows need.
// Why one per SM for the flat gather: on rows sorted by host address (what floors.py passes) it was
// the fastest grid measured on the H200 (docs/perf-notes.md, 2026-12-01): consecutive rows 50.8 GB/s
// vs 49.9 at 4 per SM, rows scattered over a 5 GB pool 47.5 vs 33.5 (fewer host pages in flight); and
// in waves (gather.cuh) with translations cold, one load per thread (the signature's default), 805 us
// against 866 at 2 per SM and 900 at 4 (docs/perf-notes.md, 2026-12-04).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "entry_checks.h"
#include "hisparse/gather.cuh"
#include "launch.h"

namespace hisparse {

namespace gather_detail {

constexpr int64_t kFlatBlocksPerSm = 1;
constexpr int64_t kWarpBlocksPerSm = 4;

}  // namespace gather_detail

// Parameter order: the gather_floor table in hisparse/kernels/signature.py (the wrapper passes its values in
// that order; tests/kernels/test_op_args.py holds this list to it).
template <int kLoadsInFlight>
void gather_floor_entry(tvm::ffi::TensorView src_rows, tvm::ffi::TensorView dst_rows, tvm::ffi::TensorView host_cache,
                        tvm::ffi::TensorView device_buffer, int64_t item_size_bytes, int64_t num_blocks,
                        int64_t block_size) {
  using namespace hisparse::host;
  TVM_FFI_ICHECK(src_rows.ndim() == 1 && is_i64(src_rows) && src_rows.is_contiguous() && on_cuda(src_rows))
      << "src_rows: contiguous int64 [n] on the device";
  const int64_t n = src_rows.size(0);
  TVM_FFI_ICHECK(dst_rows.ndim() == 1 && is_i32(dst_rows) && dst_rows.is_contiguous() && dst_rows.size(0) == n &&
                 on_cuda(dst_rows))
      << "dst_rows: contiguous int32 [n] on the device, n = len(src_rows)";
  check_kv_buffers(host_cache, device_buffer, item_size_bytes);
  TVM_FFI_ICHECK(block_size >= 32 && block_size <= kGatherMaxBlock && block_size % 32 == 0)
      << "block_size: a multiple of 32 in [32, " << kGatherMaxBlock << "], got " << block_size;
  TVM_FFI_ICHECK(num_blocks <= 65535) << "num_blocks: at most 65535, got " << num_blocks;
  if (n == 0) return;

  const int device = src_rows.device().device_id;
  DeviceGuard guard(device);
  GatherParams p{};
  p.src_rows = ptr<const int64_t>(src_rows);
  p.dst_rows = ptr<const int32_t>(dst_rows);
  p.host_cache = ptr<const void>(host_cache);
  p.device_buffer = ptr<void>(device_buffer);
  p.n = n;
  p.item_size_bytes = static_cast<uint32_t>(item_size_bytes);
  const int64_t word = flat_word_bytes(p.host_cache, p.device_buffer, p.item_size_bytes);
  const int64_t chunks = word > 0 ? n * (item_size_bytes / word) : 0;
  const bool flat = word > 0 && chunks < (int64_t{1} << 31);  // 32-bit chunk indices in the flat kernel
  const int64_t per_sm = flat ? gather_detail::kFlatBlocksPerSm : gather_detail::kWarpBlocksPerSm;
  int64_t blocks = num_blocks > 0 ? num_blocks : per_sm * host::device_attribute<cudaDevAttrMultiProcessorCount>(device);
  if (flat) {
    p.chunks_per_row = static_cast<uint32_t>(item_size_bytes / word);
    p.total_chunks = static_cast<uint32_t>(chunks);
    blocks = std::min(blocks, (chunks + block_size - 1) / block_size);
    // Narrower words: proportionally more loads in flight (the same bytes per thread), capped at 16.
    const auto kernel = word == 16 ? gather_flat_kernel<uint4, kLoadsInFlight>
                        : word == 8 ? gather_flat_kernel<uint2, std::min(loads_for_word(kLoadsInFlight, 8), 16)>
                                    : gather_flat_kernel<uint32_t, std::min(loads_for_word(kLoadsInFlight, 4), 16)>;
    launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(block_size)), 0, stream_of(src_rows),
           /*pdl=*/false, p);
  } else {
    const int64_t warps_per_block = block_size / 32;
    blocks = std::min(blocks, (n + warps_per_block - 1) / warps_per_block);
    launch(gather_warp_kernel, dim3(static_cast<unsigned>(blocks)),
           dim3(static_cast<unsigned>(block_size)), 0, stream_of(src_rows), /*pdl=*/false, p);
  }
}

}  // namespace hisparse
