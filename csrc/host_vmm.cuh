// Host entries of the `vmm` host pool (hisparse/bench/host_vmm.py): host memory made with the driver's
// virtual memory management API, cuMemCreate at a host location, mapped with cuMemAddressReserve +
// cuMemMap, readable by the device and the CPU (cuMemSetAccess). No device code.
//
// Why C++ and not ctypes or cuda-bindings: the driver's structs (CUmemAllocationProp, CUmemAccessDesc)
// come from cuda.h here, checked by the compiler, where ctypes would retype their layout by hand; and
// the module is built, cached and carried to the GPU node like every kernel, with no new dependency.
// The driver functions come from the runtime (cudaGetDriverEntryPointByVersion at the headers' CUDA
// version), not from linking -lcuda: a CPU build machine has neither the driver's libcuda nor the
// toolkit's stub of it (none on the development machines, 2026-12-05), and the runtime is linked anyway.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>

namespace hisparse {

namespace vmm_detail {

template <typename Fn>
Fn driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const cudaError_t status = cudaGetDriverEntryPointByVersion(name, &fn, CUDA_VERSION, cudaEnableDefault, &found);
  TVM_FFI_ICHECK(status == cudaSuccess && found == cudaDriverEntryPointSuccess && fn != nullptr)
      << "vmm: the driver has no " << name << " (needs a driver of CUDA " << CUDA_VERSION / 1000 << "."
      << CUDA_VERSION % 1000 / 10 << " or later for host-located cuMemCreate)";
  return reinterpret_cast<Fn>(fn);
}

// The driver functions this entry calls, looked up once per process.
struct Driver {
#define HISPARSE_VMM_FN(name) decltype(&::name) name = driver_function<decltype(&::name)>(#name)
  HISPARSE_VMM_FN(cuGetErrorName);
  HISPARSE_VMM_FN(cuMemGetAllocationGranularity);
  HISPARSE_VMM_FN(cuMemCreate);
  HISPARSE_VMM_FN(cuMemRelease);
  HISPARSE_VMM_FN(cuMemAddressReserve);
  HISPARSE_VMM_FN(cuMemAddressFree);
  HISPARSE_VMM_FN(cuMemMap);
  HISPARSE_VMM_FN(cuMemUnmap);
  HISPARSE_VMM_FN(cuMemSetAccess);
  HISPARSE_VMM_FN(cuPointerGetAttribute);
#undef HISPARSE_VMM_FN
};

inline const Driver& driver() {
  static const Driver d;
  return d;
}

inline void check(CUresult status, const char* what) {
  if (status != CUDA_SUCCESS) {
    const char* name = nullptr;
    driver().cuGetErrorName(status, &name);
    TVM_FFI_THROW(RuntimeError) << "vmm: " << what << " failed: " << (name ? name : "unknown error") << " ("
                                << static_cast<int>(status) << ")";
  }
}

}  // namespace vmm_detail

// Maps `nbytes` of host memory (node < 0: CU_MEM_LOCATION_TYPE_HOST, else HOST_NUMA node `node`),
// rounded up to the larger of the driver's minimum and recommended granularity, readable and writable by
// CUDA device `device` and by the CPU. Returns {address, mapped bytes, minimum granularity, recommended
// granularity, CU_POINTER_ATTRIBUTE_MEMORY_TYPE of the address}. The allocation handle is released once
// mapped: the memory lives until vmm_unmap_entry unmaps it.
inline tvm::ffi::Array<int64_t> vmm_map_entry(int64_t nbytes, int64_t device, int64_t node) {
  using vmm_detail::check;
  TVM_FFI_ICHECK(nbytes >= 1) << "nbytes: at least 1, got " << nbytes;
  // The runtime makes the device's primary context (torch's) current on this thread.
  TVM_FFI_ICHECK(cudaSetDevice(static_cast<int>(device)) == cudaSuccess && cudaFree(nullptr) == cudaSuccess)
      << "vmm: cannot make device " << device << "'s primary context current";
  const vmm_detail::Driver& d = vmm_detail::driver();

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;  // host allocations are not IPC capable
  prop.location.type = node < 0 ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = node < 0 ? 0 : static_cast<int>(node);
  size_t minimum = 0, recommended = 0;
  check(d.cuMemGetAllocationGranularity(&minimum, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity(MINIMUM)");
  check(d.cuMemGetAllocationGranularity(&recommended, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        "cuMemGetAllocationGranularity(RECOMMENDED)");
  const size_t granularity = std::max(minimum, recommended);
  const size_t size = (static_cast<size_t>(nbytes) + granularity - 1) / granularity * granularity;

  CUmemGenericAllocationHandle handle = 0;
  check(d.cuMemCreate(&handle, size, &prop, 0), "cuMemCreate at a host location");
  CUdeviceptr address = 0;
  CUresult status = d.cuMemAddressReserve(&address, size, granularity, 0, 0);
  if (status == CUDA_SUCCESS) status = d.cuMemMap(address, size, 0, handle, 0);
  d.cuMemRelease(handle);  // the mapping keeps the memory; unmapping frees it
  if (status != CUDA_SUCCESS) {
    if (address != 0) d.cuMemAddressFree(address, size);
    check(status, "cuMemAddressReserve/cuMemMap");
  }
  CUmemAccessDesc access[2]{};
  access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access[0].location.id = static_cast<int>(device);
  access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  access[1].location = prop.location;  // the CPU: the pool is filled and checked through its host address
  access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  status = d.cuMemSetAccess(address, size, access, 2);
  unsigned int memory_type = 0;
  if (status == CUDA_SUCCESS) {
    status = d.cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address);
  }
  if (status != CUDA_SUCCESS) {
    d.cuMemUnmap(address, size);
    d.cuMemAddressFree(address, size);
    check(status, "cuMemSetAccess(device and host)/cuPointerGetAttribute");
  }
  return tvm::ffi::Array<int64_t>{static_cast<int64_t>(address), static_cast<int64_t>(size),
                                  static_cast<int64_t>(minimum), static_cast<int64_t>(recommended),
                                  static_cast<int64_t>(memory_type)};
}

// Unmaps and frees what vmm_map_entry mapped (address and mapped bytes as it returned them).
inline void vmm_unmap_entry(int64_t address, int64_t size) {
  const vmm_detail::Driver& d = vmm_detail::driver();
  const auto ptr = static_cast<CUdeviceptr>(address);
  vmm_detail::check(d.cuMemUnmap(ptr, static_cast<size_t>(size)), "cuMemUnmap");
  vmm_detail::check(d.cuMemAddressFree(ptr, static_cast<size_t>(size)), "cuMemAddressFree");
}

}  // namespace hisparse
