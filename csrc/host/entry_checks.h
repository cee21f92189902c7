// Host-side helpers shared by the op entries (csrc/<op>.cuh): device/memory checks, the opt-in
// shared memory limit, a device guard. Host only; no kernels here.
#pragma once

#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <cstdint>

#include "launch.h"

namespace hisparse::host {

inline bool on_cuda(const tvm::ffi::TensorView& t) { return t.device().device_type == kDLCUDA; }

// Pinned host memory reaches the kernel through its UVA address: accept CPU / CUDAHost tensors (the
// wrapper checks is_pinned(); a pageable pointer would fault on the device), or a CUDA tensor.
inline bool device_addressable(const tvm::ffi::TensorView& t) {
  const auto type = t.device().device_type;
  return type == kDLCUDA || type == kDLCUDAHost || type == kDLCPU;
}

inline int64_t nbytes(const tvm::ffi::TensorView& t) {
  return t.numel() * static_cast<int64_t>((t.dtype().bits * t.dtype().lanes + 7) / 8);
}

// The KV buffers every copying entry takes: a contiguous host cache the device can read (pinned host
// or device memory), a contiguous device buffer, and an item size that fits the kernels' 32-bit math.
inline void check_kv_buffers(const tvm::ffi::TensorView& host_cache, const tvm::ffi::TensorView& device_buffer,
                             int64_t item_size_bytes) {
  TVM_FFI_ICHECK(item_size_bytes >= 1 && item_size_bytes <= 0x7FFFFFFF) << "item_size_bytes: must be >= 1";
  TVM_FFI_ICHECK(device_addressable(host_cache) && host_cache.is_contiguous())
      << "host_cache: contiguous, pinned host or device";
  TVM_FFI_ICHECK(on_cuda(device_buffer) && device_buffer.is_contiguous()) << "device_buffer: contiguous CUDA";
}

inline void check_num_real_reqs(const tvm::ffi::TensorView& num_real_reqs) {
  TVM_FFI_ICHECK(num_real_reqs.ndim() == 1 && num_real_reqs.size(0) == 1 && is_i32(num_real_reqs) &&
                 on_cuda(num_real_reqs))
      << "num_real_reqs: int32 [1] on the device";
}

// An integer attribute of `device`, queried once per device (the first 64) and attribute. A device id past
// the cache is queried every call rather than answered with a guess: launch shapes (SM count, L2, shared
// memory) must come from the device they run on (H20 78 SMs, H100 PCIe 114, H200 132).
template <cudaDeviceAttr kAttr>
inline int device_attribute(int device) {
  static int cached[64] = {0};
  const bool cacheable = device >= 0 && device < 64;
  if (cacheable && cached[device] != 0) return cached[device];
  int v = 0;
  cudaError_t e = cudaDeviceGetAttribute(&v, kAttr, device);
  TVM_FFI_ICHECK(e == cudaSuccess) << "cudaDeviceGetAttribute(" << static_cast<int>(kAttr) << ", device " << device
                                   << "): " << cudaGetErrorString(e);
  if (cacheable) cached[device] = v;
  return v;
}

// Opt-in shared memory limit per block of `device` (227 KiB on H100/H200).
inline int max_smem_optin(int device) { return device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(device); }

// Launch on the tensors' device even if another device is current (restored on exit).
struct DeviceGuard {
  int prev = -1;
  explicit DeviceGuard(int device) {
    cudaGetDevice(&prev);
    if (prev != device) cudaSetDevice(device);
  }
  ~DeviceGuard() {
    int cur = -1;
    cudaGetDevice(&cur);
    if (prev >= 0 && cur != prev) cudaSetDevice(prev);
  }
};


}  // namespace hisparse::host
