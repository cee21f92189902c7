// A tiny kernel for tests/test_jit.py only: copies rows through the shared warp copy and the host
// launch helper, so the JIT tests exercise the same includes, flags and launch path as real ops.
#pragma once

#include <hisparse/copy.cuh>
#include <hisparse/pdl.cuh>

#include "launch.h"

namespace jit_probe {

// Warp w copies row w: dst[w] = src[w], item_size_bytes each.
template <int kInFlight, bool kPdl>
__global__ void copy_rows_kernel(const uint8_t* src, uint8_t* dst, int64_t rows, uint32_t item_size_bytes) {
  hisparse::pdl_wait_primary<kPdl>();
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / hisparse::kWarpSize;
  const uint32_t lane = threadIdx.x % hisparse::kWarpSize;
  if (warp < rows) {
    hisparse::warp_copy_item<kInFlight>(hisparse::row_ptr(src, warp, item_size_bytes),
                                        hisparse::row_ptr(dst, warp, item_size_bytes), item_size_bytes, lane);
  }
  hisparse::pdl_launch_dependents<kPdl>();
}

template <int kInFlight, bool kPdl>
void copy_rows_entry(tvm::ffi::TensorView src, tvm::ffi::TensorView dst, int64_t item_size_bytes) {
  namespace h = hisparse::host;
  TVM_FFI_ICHECK(item_size_bytes > 0) << "item_size_bytes must be positive, got " << item_size_bytes;
  const int64_t src_bytes = src.numel() * src.dtype().bits / 8;
  const int64_t dst_bytes = dst.numel() * dst.dtype().bits / 8;
  TVM_FFI_ICHECK(src_bytes == dst_bytes) << "src and dst sizes differ: " << src_bytes << " vs " << dst_bytes;
  TVM_FFI_ICHECK(src_bytes % item_size_bytes == 0) << "size " << src_bytes << " is not a multiple of the item size";
  const int64_t rows = src_bytes / item_size_bytes;
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((rows * hisparse::kWarpSize + kThreads - 1) / kThreads));
  h::launch(copy_rows_kernel<kInFlight, kPdl>, grid, dim3(kThreads), 0, h::stream_of(dst), kPdl,
            h::ptr<const uint8_t>(src), h::ptr<uint8_t>(dst), rows, static_cast<uint32_t>(item_size_bytes));
}

}  // namespace jit_probe
