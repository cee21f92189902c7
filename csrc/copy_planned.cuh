// Host entry of the planned copy (device code: hisparse/planned.cuh).
//
// The Python wrapper (hisparse/ops/copy_planned.py) validates once and raises InputError; these
// checks are the C++ backstop. No allocation, caller's stream: capturable in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "entry_checks.h"
#include "hisparse/planned.cuh"
#include "launch.h"

namespace hisparse {

// Parameter order: the copy_planned table in hisparse/kernels/signature.py (the wrapper passes its values in
// that order; tests/kernels/test_op_args.py holds this list to it).
template <int kBlockSize>
void copy_planned_entry(tvm::ffi::TensorView miss_src, tvm::ffi::TensorView miss_dst, tvm::ffi::TensorView miss_count,
                        tvm::ffi::TensorView num_real_reqs, tvm::ffi::TensorView host_cache,
                        tvm::ffi::TensorView device_buffer, int64_t item_size_bytes, int64_t num_blocks,
                        int64_t tiles_per_request) {
  using namespace hisparse::host;
  TVM_FFI_ICHECK(miss_count.ndim() == 1 && is_i32(miss_count) && miss_count.is_contiguous() && on_cuda(miss_count))
      << "miss_count: contiguous int32 [batch] on the device";
  const int64_t batch = miss_count.size(0);
  TVM_FFI_ICHECK(batch <= 0x7FFFFFFF) << "miss_count: batch too large";
  TVM_FFI_ICHECK(miss_src.ndim() == 2 && is_i64(miss_src) && miss_src.size(0) >= batch && miss_src.stride(1) == 1)
      << "miss_src: int64 [>=batch, width] with contiguous rows";
  TVM_FFI_ICHECK(miss_dst.ndim() == 2 && is_i32(miss_dst) && miss_dst.size(0) >= batch && miss_dst.stride(1) == 1 &&
                 miss_dst.stride(0) == miss_src.stride(0))
      << "miss_dst: int32 [>=batch, width], same row stride as miss_src";
  check_num_real_reqs(num_real_reqs);
  check_kv_buffers(host_cache, device_buffer, item_size_bytes);
  TVM_FFI_ICHECK(num_blocks >= 1 && num_blocks <= 65535) << "num_blocks: must be in [1, 65535], got " << num_blocks;
  TVM_FFI_ICHECK(tiles_per_request >= 0 && tiles_per_request <= 65535)
      << "tiles_per_request: must be in [0, 65535], got " << tiles_per_request;

  PlannedCopyParams p{};
  p.miss_src = ptr<const int64_t>(miss_src);
  p.miss_dst = ptr<const int32_t>(miss_dst);
  p.miss_count = ptr<const int32_t>(miss_count);
  p.num_real_reqs = ptr<const int32_t>(num_real_reqs);
  p.host_cache = ptr<const void>(host_cache);
  p.device_buffer = ptr<void>(device_buffer);
  p.plan_stride = miss_src.stride(0);
  p.width = miss_src.size(1) < miss_dst.size(1) ? miss_src.size(1) : miss_dst.size(1);
  p.host_rows = nbytes(host_cache) / item_size_bytes;
  p.device_rows = nbytes(device_buffer) / item_size_bytes;
  p.tiles = tiles_per_request;
  p.batch = static_cast<int32_t>(batch);
  p.item_size_bytes = static_cast<uint32_t>(item_size_bytes);

  DeviceGuard guard(miss_count.device().device_id);
  launch(copy_planned_kernel<kBlockSize>, dim3(static_cast<unsigned>(num_blocks)), dim3(kBlockSize), 0,
         stream_of(miss_count), /*pdl=*/false, p);
}

}  // namespace hisparse
