// Programmatic Dependent Launch, device side. kPdl is a compile-time switch so both variants can be
// measured on Hopper; with kPdl=false (and on pre-sm90 targets) these compile to nothing and the
// dependent kernel relies on plain stream order.
#pragma once

namespace hisparse {

// Blocks until the preceding kernel in the stream has completed and its memory is visible.
// Must run before the dependent kernel reads anything the primary wrote.
template <bool kPdl>
__device__ __forceinline__ void pdl_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kPdl) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the dependent kernel start launching (its prologue overlaps our tail).
template <bool kPdl>
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kPdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace hisparse
