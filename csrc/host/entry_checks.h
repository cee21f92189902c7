// Host-side helpers shared by the op entries (csrc/<op>.cuh): device/memory checks, the opt-in
// shared memory limit, a device guard. Host only; no kernels here.
#pragma once

#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <cstdint>

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

// Opt-in shared memory limit per block of `device` (227 KiB on H100/H200), queried once per device.
inline int max_smem_optin(int device) {
  static int cached[64] = {0};
  if (device < 0 || device >= 64) return 0;
  if (cached[device] == 0) {
    int v = 0;
    cudaError_t e = cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    TVM_FFI_ICHECK(e == cudaSuccess) << "cudaDeviceGetAttribute: " << cudaGetErrorString(e);
    cached[device] = v;
  }
  return cached[device];
}

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
