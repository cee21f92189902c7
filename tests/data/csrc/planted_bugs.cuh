// Deliberate bugs for the compute-sanitizer control runs (scripts/gpu_sanitize.py, docs/semantics.md §H7):
// a sanitizer run that reports nothing proves little unless the same setup catches these. Built
// through the same JIT path as the real ops (hisparse.jit, same flags and host launch helper).
// Never call these outside the sanitizer scripts.
#pragma once

#include <cstdint>

#include "launch.h"

namespace planted_bugs {

// Out-of-bounds global write: each of kBytesPastEnd/16 threads stores 16 bytes starting exactly at
// the end of `buf` (with PYTORCH_NO_CUDA_MEMORY_CACHING=1 the tensor is its own cudaMalloc, so the
// first byte past it belongs to no allocation). memcheck must report every one of these stores.
template <int kBytesPastEnd>
__global__ void oob_write_kernel(uint8_t* end) {
  if (threadIdx.x * 16 < kBytesPastEnd) {
    reinterpret_cast<uint4*>(end)[threadIdx.x] = make_uint4(0xDEAD, 0xBEEF, 0xDEAD, 0xBEEF);
  }
}

template <int kBytesPastEnd>
void oob_write_entry(tvm::ffi::TensorView buf) {
  namespace h = hisparse::host;
  const int64_t nbytes = buf.numel() * ((buf.dtype().bits + 7) / 8);
  TVM_FFI_ICHECK(nbytes % 16 == 0) << "planted oob: use a buffer of a multiple of 16 bytes";
  h::launch(oob_write_kernel<kBytesPastEnd>, dim3(1), dim3((kBytesPastEnd + 15) / 16), 0, h::stream_of(buf), false,
            h::ptr<uint8_t>(buf) + nbytes);
}

// Shared-memory race: every thread writes its own word, then reads its neighbour's with no barrier in
// between (read-after-write hazard across warps). racecheck must report it.
template <int kThreads>
__global__ void smem_race_kernel(int32_t* out) {
  __shared__ int32_t s[kThreads];
  s[threadIdx.x] = static_cast<int32_t>(threadIdx.x);
  // missing __syncthreads() here is the planted bug
  out[threadIdx.x] = s[(threadIdx.x + 32) % kThreads];
}

template <int kThreads>
void smem_race_entry(tvm::ffi::TensorView out) {
  namespace h = hisparse::host;
  TVM_FFI_ICHECK(out.numel() >= kThreads && out.dtype().bits == 32) << "planted race: int32 out of >= kThreads";
  h::launch(smem_race_kernel<kThreads>, dim3(1), dim3(kThreads), 0, h::stream_of(out), false, h::ptr<int32_t>(out));
}

}  // namespace planted_bugs
