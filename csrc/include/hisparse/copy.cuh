// The one warp-cooperative item copy used by every hisparse kernel.
//
// Byte-exact for every item size and alignment: upstream's v2.b64 path silently dropped the bytes
// past the last multiple of 8 (docs/semantics.md §2.5); we never drop a byte. The widest word W in
// {16, 8, 4, 1} bytes for which src and dst have the same alignment mod W is chosen at run time;
// a head of < W bytes brings both to W alignment, the body moves W-byte words, a tail of < W bytes
// finishes. Rows of 576/656/1152/512 B in 16-B aligned buffers take the 16-B path with no head or tail.
//
// Body loads go through the read-only non-coherent path (__ldg: host rows never change during a
// swap) and stores are .cg (cache in L2 only: the rows are read next by attention, not by this SM).
// Each lane issues up to kInFlight loads before its first store: a zero-copy PCIe read costs ~1-2 us
// of latency, so the number of reads in flight per warp is what sets the bandwidth (docs/semantics.md §H1).
// No tvm/torch here: framework-free device code.
#pragma once

#include <cstdint>

namespace hisparse {

constexpr int kWarpSize = 32;

template <typename W>
__device__ __forceinline__ W load_nc(const W* p) { return __ldg(p); }
__device__ __forceinline__ uint8_t load_nc(const uint8_t* p) {
  return static_cast<uint8_t>(__ldg(reinterpret_cast<const unsigned char*>(p)));
}
template <typename W>
__device__ __forceinline__ void store_cg(W* p, const W& v) { __stcg(p, v); }
__device__ __forceinline__ void store_cg(uint8_t* p, uint8_t v) {
  __stcg(reinterpret_cast<unsigned char*>(p), static_cast<unsigned char>(v));
}

// Copies bytes [0, n) one byte per lane; n < 32 at every call site (heads and tails).
__device__ __forceinline__ void warp_copy_bytes(const uint8_t* src, uint8_t* dst, uint32_t n, uint32_t lane) {
  for (uint32_t i = lane; i < n; i += kWarpSize) store_cg(dst + i, load_nc(src + i));
}

// Body of W-byte words: lane l moves words l, l+32, ...; kInFlight loads are issued before stores.
template <typename W, int kInFlight>
__device__ __forceinline__ void warp_copy_words(const W* src, W* dst, uint32_t nwords, uint32_t lane) {
  for (uint32_t base = lane; base < nwords; base += kWarpSize * kInFlight) {
    W v[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const uint32_t i = base + j * kWarpSize;
      if (i < nwords) v[j] = load_nc(src + i);
    }
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const uint32_t i = base + j * kWarpSize;
      if (i < nwords) store_cg(dst + i, v[j]);
    }
  }
}

template <typename W, int kInFlight>
__device__ __forceinline__ void warp_copy_aligned_as(const uint8_t* src, uint8_t* dst, uint32_t n, uint32_t lane) {
  constexpr uint32_t kW = sizeof(W);
  const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(src) & (kW - 1));
  const uint32_t head = min(n, (kW - mis) & (kW - 1));
  warp_copy_bytes(src, dst, head, lane);
  const uint32_t nwords = (n - head) / kW;
  warp_copy_words<W, kInFlight>(reinterpret_cast<const W*>(src + head), reinterpret_cast<W*>(dst + head), nwords, lane);
  const uint32_t done = head + nwords * kW;
  warp_copy_bytes(src + done, dst + done, n - done, lane);
}

// Copy one item of n bytes from src (pinned host or device) to dst (device). All 32 lanes of the
// warp must call it with the same arguments (warp-uniform branch on alignment).
template <int kInFlight = 2>
__device__ __forceinline__ void warp_copy_item(const void* src_v, void* dst_v, uint32_t n, uint32_t lane) {
  const auto* src = static_cast<const uint8_t*>(src_v);
  auto* dst = static_cast<uint8_t*>(dst_v);
  const uintptr_t diff = reinterpret_cast<uintptr_t>(src) ^ reinterpret_cast<uintptr_t>(dst);
  if ((diff & 15) == 0) {
    warp_copy_aligned_as<uint4, kInFlight>(src, dst, n, lane);
  } else if ((diff & 7) == 0) {
    warp_copy_aligned_as<uint2, 2 * kInFlight>(src, dst, n, lane);
  } else if ((diff & 3) == 0) {
    warp_copy_aligned_as<uint32_t, 4 * kInFlight>(src, dst, n, lane);
  } else {
    warp_copy_bytes(src, dst, n, lane);
  }
}

// Widest word (16, 8 or 4 bytes) that divides the item size and both bases, 0 if none does: the
// word of the flat multi-row copies (copy_rows.cuh block_copy_rows, gather.cuh gather_flat_kernel,
// whose host entry picks its instantiation with it).
__host__ __device__ __forceinline__ uint32_t flat_word_bytes(const void* src_base, const void* dst_base,
                                                             uint32_t item_size_bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(src_base) | reinterpret_cast<uintptr_t>(dst_base) | item_size_bytes;
  if ((a & 15u) == 0) return 16;
  if ((a & 7u) == 0) return 8;
  if ((a & 3u) == 0) return 4;
  return 0;
}

// Loads per thread for W-byte words that keep the bytes in flight of `loads16` 16-byte loads.
__host__ __device__ constexpr int loads_for_word(int loads16, int word_bytes) { return loads16 * 16 / word_bytes; }

// Address of row `row` in a byte-addressed buffer (row r at byte offset r * item_size_bytes).
__device__ __forceinline__ const uint8_t* row_ptr(const void* base, int64_t row, uint32_t item_size_bytes) {
  return static_cast<const uint8_t*>(base) + row * static_cast<int64_t>(item_size_bytes);
}
__device__ __forceinline__ uint8_t* row_ptr(void* base, int64_t row, uint32_t item_size_bytes) {
  return static_cast<uint8_t*>(base) + row * static_cast<int64_t>(item_size_bytes);
}

}  // namespace hisparse
