// Host-side helpers for the tvm-ffi entries: tensor access, argument checks, kernel launch on the
// caller's stream (torch's current stream via tvm-ffi's environment stream, which is what makes
// CUDA-graph capture work), optional PDL attribute.
#pragma once

#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <cstdint>

namespace hisparse::host {

using tvm::ffi::TensorView;

template <typename T>
inline T* ptr(const TensorView& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + t.byte_offset());
}

inline cudaStream_t stream_of(const TensorView& t) {
  return static_cast<cudaStream_t>(TVMFFIEnvGetStream(t.device().device_type, t.device().device_id));
}

inline bool is_dtype(const TensorView& t, uint8_t code, uint8_t bits) {
  return t.dtype().code == code && t.dtype().bits == bits && t.dtype().lanes == 1;
}
inline bool is_i16(const TensorView& t) { return is_dtype(t, kDLInt, 16); }
inline bool is_i32(const TensorView& t) { return is_dtype(t, kDLInt, 32); }
inline bool is_i64(const TensorView& t) { return is_dtype(t, kDLInt, 64); }

// Launch `kernel` with cudaLaunchKernelEx; `pdl` sets programmatic stream serialization so the
// kernel may start before its predecessor finishes (it must call pdl_wait_primary first).
template <typename... KArgs, typename... Args>
inline void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   bool pdl, Args&&... args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  // A block may use 48 KiB of shared memory, static and dynamic together, unless its kernel opts in
  // (the commit's static 12 KiB plus 36 KiB of dynamic already crosses it).
  if (smem > 0) {
    cudaFuncAttributes fa{};
    cudaError_t e = cudaFuncGetAttributes(&fa, kernel);
    TVM_FFI_ICHECK(e == cudaSuccess) << "cudaFuncGetAttributes: " << cudaGetErrorString(e);
    if (smem + fa.sharedSizeBytes > 48 * 1024) {
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      TVM_FFI_ICHECK(e == cudaSuccess) << "cudaFuncSetAttribute(smem=" << smem << "): " << cudaGetErrorString(e);
    }
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
  TVM_FFI_ICHECK(e == cudaSuccess) << "kernel launch failed: " << cudaGetErrorString(e);
}

}  // namespace hisparse::host
