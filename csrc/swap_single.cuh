// Host entry of the single-step exact-LRU swap (device code: hisparse/lru.cuh).
//
// The Python wrapper (hisparse/ops/swap_single.py) validates every argument once with the shared
// validation module and raises InputError; the checks here are the C++ backstop for callers that
// reach `run` directly, so a malformed call fails with a message instead of an illegal address.
// Nothing is allocated: the plan tensors are always passed (dummies when kRecordPlan is false) and
// the launch goes on the caller's stream, so the call can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hisparse/lru.cuh"
#include "entry_checks.h"
#include "launch.h"

namespace hisparse {

// Parameter order: the swap_single table in hisparse/kernels/signature.py (the wrapper passes its values in
// that order; tests/kernels/test_op_args.py holds this list to it).
template <int kBlockSize, bool kRecordPlan, bool kCopy, bool kFlatCopy>
void swap_single_entry(tvm::ffi::TensorView top_k_tokens, tvm::ffi::TensorView device_buffer_tokens,
                       tvm::ffi::TensorView host_cache_locs, tvm::ffi::TensorView device_buffer_locs,
                       tvm::ffi::TensorView host_cache, tvm::ffi::TensorView device_buffer,
                       tvm::ffi::TensorView top_k_device_locs, tvm::ffi::TensorView req_pool_indices,
                       tvm::ffi::TensorView seq_lens, tvm::ffi::TensorView lru_slots,
                       tvm::ffi::TensorView num_real_reqs, int64_t item_size_bytes, int64_t page_size,
                       tvm::ffi::TensorView miss_src, tvm::ffi::TensorView miss_dst,
                       tvm::ffi::TensorView miss_count) {
  using namespace hisparse::host;

  TVM_FFI_ICHECK(top_k_tokens.ndim() == 2 && is_i32(top_k_tokens)) << "top_k_tokens: int32 [bs, K]";
  TVM_FFI_ICHECK(on_cuda(top_k_tokens)) << "top_k_tokens: must be a CUDA tensor";
  const int64_t bs = top_k_tokens.size(0);
  const int64_t K = top_k_tokens.size(1);
  TVM_FFI_ICHECK(K >= 1 && top_k_tokens.stride(1) == 1) << "top_k_tokens: K >= 1 and contiguous rows";
  TVM_FFI_ICHECK(lru_slots.ndim() == 2 && is_i16(lru_slots) && lru_slots.is_contiguous())
      << "lru_slots: contiguous int16 [R, HOT]";
  const int64_t R = lru_slots.size(0);
  const int64_t HOT = lru_slots.size(1);
  TVM_FFI_ICHECK(K <= HOT && HOT <= 32767) << "lru_slots: need top_k=" << K << " <= hot_buffer_size=" << HOT
                                           << " <= 32767";
  TVM_FFI_ICHECK(page_size >= 1) << "page_size: must be >= 1, got " << page_size;
  for (const tvm::ffi::TensorView* t : {&device_buffer_tokens, &device_buffer_locs}) {
    TVM_FFI_ICHECK(t->ndim() == 2 && is_i32(*t) && t->size(0) == R && t->size(1) == HOT + page_size &&
                   t->stride(1) == 1)
        << "device_buffer_tokens/device_buffer_locs: int32 [R, HOT + page_size] with contiguous rows";
  }
  TVM_FFI_ICHECK(device_buffer_tokens.stride(0) == device_buffer_locs.stride(0))
      << "device_buffer_locs: must share device_buffer_tokens' row stride";
  TVM_FFI_ICHECK(host_cache_locs.ndim() == 2 && is_i64(host_cache_locs) && host_cache_locs.size(0) == R &&
                 host_cache_locs.is_contiguous())
      << "host_cache_locs: contiguous int64 [R, max_len]";
  TVM_FFI_ICHECK(top_k_device_locs.ndim() == 2 && is_i32(top_k_device_locs) && top_k_device_locs.size(0) == bs &&
                 top_k_device_locs.size(1) == K && top_k_device_locs.stride(1) == 1)
      << "top_k_device_locs: int32 [bs, K] with contiguous rows";
  for (const tvm::ffi::TensorView* t : {&req_pool_indices, &seq_lens}) {
    TVM_FFI_ICHECK(t->ndim() == 1 && t->size(0) == bs && (is_i32(*t) || is_i64(*t)) && t->is_contiguous())
        << "req_pool_indices/seq_lens: contiguous int32 or int64 [bs]";
  }
  check_num_real_reqs(num_real_reqs);
  check_kv_buffers(host_cache, device_buffer, item_size_bytes);
  TVM_FFI_ICHECK(nbytes(host_cache) >= item_size_bytes && nbytes(device_buffer) >= item_size_bytes)
      << "host_cache/device_buffer: must hold at least one item";
  int64_t plan_stride = 0;
  if constexpr (kRecordPlan) {
    TVM_FFI_ICHECK(miss_src.ndim() == 2 && is_i64(miss_src) && miss_src.size(0) >= bs && miss_src.size(1) >= K &&
                   miss_src.stride(1) == 1)
        << "miss_src: int64 [>=bs, >=K] with contiguous rows";
    TVM_FFI_ICHECK(miss_dst.ndim() == 2 && is_i32(miss_dst) && miss_dst.size(0) >= bs && miss_dst.size(1) >= K &&
                   miss_dst.stride(1) == 1 && miss_dst.stride(0) == miss_src.stride(0))
        << "miss_dst: int32 [>=bs, >=K], same row stride as miss_src";
    TVM_FFI_ICHECK(miss_count.ndim() == 1 && is_i32(miss_count) && miss_count.size(0) >= bs &&
                   miss_count.is_contiguous())
        << "miss_count: int32 [>=bs]";
    plan_stride = miss_src.stride(0);
  }

  const int device = top_k_tokens.device().device_id;
  // the padded layout: as large as the flat copy's, and it holds the warp copy's (lru.cuh)
  const SwapSmemLayout layout =
      SwapSmemLayout::make(static_cast<int32_t>(K), static_cast<int32_t>(HOT), /*even_tokens=*/true);
  DeviceGuard guard(device);
  const int limit = max_smem_optin(device);
  TVM_FFI_ICHECK(static_cast<int64_t>(layout.bytes) <= limit)
      << "top_k_tokens/lru_slots: top_k=" << K << " with hot_buffer_size=" << HOT << " needs " << layout.bytes
      << " B of shared memory, the device allows " << limit << " B per block";

  SwapSingleParams p{};
  p.top_k_tokens = ptr<const int32_t>(top_k_tokens);
  p.device_buffer_tokens = ptr<int32_t>(device_buffer_tokens);
  p.device_buffer_locs = ptr<const int32_t>(device_buffer_locs);
  p.host_cache_locs = ptr<const int64_t>(host_cache_locs);
  p.host_cache = ptr<const void>(host_cache);
  p.device_buffer = ptr<void>(device_buffer);
  p.top_k_device_locs = ptr<int32_t>(top_k_device_locs);
  p.req_pool_indices = ptr<const void>(req_pool_indices);
  p.seq_lens = ptr<const void>(seq_lens);
  p.lru_slots = ptr<int16_t>(lru_slots);
  p.num_real_reqs = ptr<const int32_t>(num_real_reqs);
  if constexpr (kRecordPlan) {
    p.miss_src = ptr<int64_t>(miss_src);
    p.miss_dst = ptr<int32_t>(miss_dst);
    p.miss_count = ptr<int32_t>(miss_count);
  }
  p.top_k_stride = top_k_tokens.stride(0);
  p.out_stride = top_k_device_locs.stride(0);
  p.buffer_stride = device_buffer_tokens.stride(0);
  p.max_len = host_cache_locs.size(1);
  p.plan_stride = plan_stride;
  p.num_req_slots = R;
  p.host_rows = nbytes(host_cache) / item_size_bytes;
  p.device_rows = nbytes(device_buffer) / item_size_bytes;
  p.top_k = static_cast<int32_t>(K);
  p.hot_buffer_size = static_cast<int32_t>(HOT);
  p.page_size = static_cast<int32_t>(page_size);
  p.item_size_bytes = static_cast<uint32_t>(item_size_bytes);
  p.index_i64 = (is_i64(req_pool_indices) ? 1u : 0u) | (is_i64(seq_lens) ? 2u : 0u);

  launch(swap_single_kernel<kBlockSize, kRecordPlan, kCopy, kFlatCopy>, dim3(static_cast<unsigned>(bs)),
         dim3(kBlockSize), layout.bytes, stream_of(top_k_tokens), /*pdl=*/false, p);
}

}  // namespace hisparse
