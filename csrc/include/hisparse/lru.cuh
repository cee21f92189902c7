// Single-step exact-LRU swap (docs/semantics.md §2.3-2.4), one CTA per request. Framework-free device code.
//
// Bit-exact with hisparse/reference/swap_single.py: outputs, device_buffer_tokens, lru_slots, device
// bytes and the miss plan. Everything that decides a result is order-independent (membership tests,
// prefix scans, a deterministic "last index wins" for repeated keys), so no atomic race can change
// an output; atomics only build the hash table.
//
// Per long request (seq_len > HOT), with E = evictable slots and H = hit slots, both in old LRU order:
//   1. hash the top-k (token -> index); the newest token (seq_len-1) resolves to slot HOT directly;
//   2. scan lru_slots in warp chunks: hits write their output and are compacted forward in s_lru_out,
//      evictables backward (s_lru_out[HOT-1-e] = E[e]);
//   3. m-th miss in top-k index order takes E[m] = s_lru_out[HOT-1-m];
//   4. new LRU order = E[M:] ++ E[:M] ++ H;
//   5. one warp per miss copies host row -> device row, or (kFlatCopy) the CTA copies its misses as one
//      flat list (block_copy_rows); or the kernel only records the plan and a copy over the whole grid
//      follows (planned.cuh, swap_single.cuh). The wrapper picks the copy by batch size
//      (hisparse/kernels/ops/swap_single.py, FLAT_COPY_MAX_BATCH).
//
// Sizes are runtime (dynamic shared memory sized at launch); only the block size, whether a miss
// plan is recorded and whether this kernel copies are template arguments (each instantiation costs
// ~10 s of nvcc).
//
// Device values outside the contract (checked only by the wrapper's debug mode, since that needs a
// sync) never make the kernel touch memory outside its tensors: a request slot outside [0, R) turns
// the row into a padding row; an lru_slots entry outside [0, HOT) is never evicted (it keeps its
// place among the hits); a missed token >= max_len has host row -1; a copy whose host row or
// victim row lies outside its buffer is skipped (the plan still records the rows, and the planned
// copy skips them the same way). The multi-step kernels clamp the same way.
#pragma once

#include <cstdint>

#include "hisparse/copy.cuh"
#include "hisparse/copy_rows.cuh"

namespace hisparse {

// ---------------------------------------------------------------------------------------------
// Kernel arguments. Strides are in elements. The plan tables share one row stride (validated).
struct SwapSingleParams {
  const int32_t* top_k_tokens;        // [bs, K], row stride top_k_stride
  int32_t* device_buffer_tokens;      // [R, HOT+page], row stride buffer_stride (mutated)
  const int32_t* device_buffer_locs;  // [R, HOT+page], same row stride
  const int64_t* host_cache_locs;     // [R, max_len], contiguous
  const void* host_cache;             // pinned host (UVA) or device, row r at r*item_size_bytes
  void* device_buffer;                // device, row r at r*item_size_bytes
  int32_t* top_k_device_locs;         // [bs, K], row stride out_stride (output)
  const void* req_pool_indices;       // [bs] int32 or int64 (index_i64 bit 0)
  const void* seq_lens;               // [bs] int32 or int64 (index_i64 bit 1)
  int16_t* lru_slots;                 // [R, HOT], contiguous (mutated)
  const int32_t* num_real_reqs;       // [1]
  int64_t* miss_src;                  // [>=bs, >=K], row stride plan_stride (only with kRecordPlan)
  int32_t* miss_dst;
  int32_t* miss_count;                // [>=bs]
  int64_t top_k_stride;
  int64_t out_stride;
  int64_t buffer_stride;
  int64_t max_len;
  int64_t plan_stride;
  int64_t num_req_slots;  // R: a req_pool_indices value outside [0, R) makes its row a padding row
  int64_t host_rows;      // rows of host_cache: a miss whose host row is outside [0, host_rows) is not copied
  int64_t device_rows;    // rows of device_buffer: a victim row outside [0, device_rows) is not written
  int32_t top_k;
  int32_t hot_buffer_size;
  int32_t page_size;
  uint32_t item_size_bytes;
  uint32_t index_i64;  // bit 0: req_pool_indices is int64; bit 1: seq_lens is int64
};

// ---------------------------------------------------------------------------------------------
// Dynamic shared memory layout, computed identically on host (launch size) and device. Mirrored in
// hisparse/ops/swap_single.py (swap_single_smem_bytes) so the wrapper can reject a configuration
// that does not fit before any launch; keep the two in sync.
//   int32: s_tokens[K] | s_hash_keys[HS] | s_chunk_off[C+1] | s_chunk_mask[C] | s_scan[kScanWords]
//   int16: s_lru_out[HOT] | s_hash_vals[HS]
// HS = next power of two >= 2K: load factor <= 1/2 keeps linear probes short, and a power of two lets
// the multiplicative hash take the product's high bits (Fibonacci hashing) instead of a modulo. It
// never exceeds 4K, so K=8192 with HOT=32767 still fits in 227 KiB (about 200 KiB). For the flat copy
// (even_tokens) s_tokens takes an even number of words so that the hash keys start 8-byte aligned: once
// the lookups are done they hold the copy's int64 host rows (HS >= 2K words hold K of them). The launch
// sizes the padded layout, which holds either; the warp-copy kernel keeps the unpadded offsets, so its
// code is the same as before the flat copy existed.
constexpr int kSwapScanWords = 40;  // 32 warp partials + a few block-wide scalars

struct SwapSmemLayout {
  int32_t top_k, hot, chunks, hash_size, hash_log2;
  uint32_t off_hash_keys, off_chunk_off, off_chunk_mask, off_scan, off_lru_out, off_hash_vals, bytes;

  __host__ __device__ static SwapSmemLayout make(int32_t top_k, int32_t hot, bool even_tokens) {
    SwapSmemLayout l{};
    l.top_k = top_k;
    l.hot = hot;
    l.chunks = (hot + kWarpSize - 1) / kWarpSize;
    l.hash_log2 = 1;
    while ((1 << l.hash_log2) < 2 * top_k) ++l.hash_log2;
    l.hash_size = 1 << l.hash_log2;
    uint32_t words = static_cast<uint32_t>(top_k + (even_tokens ? (top_k & 1) : 0));
    l.off_hash_keys = words;
    words += l.hash_size;
    l.off_chunk_off = words;
    words += l.chunks + 1;
    l.off_chunk_mask = words;
    words += l.chunks;
    l.off_scan = words;
    words += kSwapScanWords;
    const uint32_t int32_bytes = words * 4;  // int16 region starts 4-byte aligned
    l.off_lru_out = int32_bytes;
    l.off_hash_vals = int32_bytes + 2u * static_cast<uint32_t>(hot);
    l.bytes = (l.off_hash_vals + 2u * static_cast<uint32_t>(l.hash_size) + 15u) & ~15u;
    return l;
  }
};

namespace lru_detail {

constexpr int32_t kEmpty = -1;  // hash key of a free entry (tokens in the table are >= 0)
constexpr int32_t kHit = -1;    // s_tokens[i] once entry i is resolved (hit, newest, or invalid)

__device__ __forceinline__ uint32_t hash_of(int32_t token, int hash_log2) {
  // Knuth's multiplicative constant; high bits of the product spread strided token sets evenly.
  return (static_cast<uint32_t>(token) * 2654435761u) >> (32 - hash_log2);
}

// vals[pos] = max(vals[pos], v) for an int16 in shared memory, through a CAS on its 32-bit word.
// Only repeated top-k tokens (outside the input contract) ever contend; "max" makes the last index
// win deterministically, as in the reference. Each failed CAS means another write to this word
// succeeded, and at most 2*K writes target one word, so the loop is bounded by that.
__device__ __forceinline__ void atomic_max_i16(int16_t* p, int16_t v, int max_attempts) {
  auto* word = reinterpret_cast<unsigned int*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{3});
  const unsigned shift = (reinterpret_cast<uintptr_t>(p) & 2u) ? 16u : 0u;
  unsigned int old = atomicOr(word, 0u);  // atomic read: racecheck sees no plain access racing the CAS
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    const auto cur = static_cast<int16_t>(static_cast<uint16_t>(old >> shift));
    if (cur >= v) return;
    const unsigned int desired =
        (old & ~(0xFFFFu << shift)) | (static_cast<unsigned int>(static_cast<uint16_t>(v)) << shift);
    const unsigned int seen = atomicCAS(word, old, desired);
    if (seen == old) return;
    old = seen;
  }
}

// Insert token -> index (token >= 0). The table has >= 2K entries for <= K keys, so a free entry
// exists and the probe loop (bounded by the table size) always ends by inserting or finding the key.
__device__ __forceinline__ void hash_insert(int32_t* keys, int16_t* vals, int hash_log2, int32_t token,
                                            int16_t index, int max_attempts) {
  const uint32_t mask = (1u << hash_log2) - 1u;
  uint32_t h = hash_of(token, hash_log2);
  for (uint32_t probe = 0; probe <= mask; ++probe, h = (h + 1) & mask) {
    const int32_t prev = atomicCAS(keys + h, kEmpty, token);
    if (prev == kEmpty || prev == token) {
      atomic_max_i16(vals + h, index, max_attempts);
      return;
    }
  }
}

// Top-k index of `token`, or -1. Keys are never removed, so an empty entry ends the probe.
__device__ __forceinline__ int32_t hash_lookup(const int32_t* keys, const int16_t* vals, int hash_log2,
                                               int32_t token) {
  if (token < 0) return -1;  // empty hot slots (-1) are evictable, never hits
  const uint32_t mask = (1u << hash_log2) - 1u;
  uint32_t h = hash_of(token, hash_log2);
  for (uint32_t probe = 0; probe <= mask; ++probe, h = (h + 1) & mask) {
    const int32_t k = keys[h];
    if (k == token) return vals[h];
    if (k == kEmpty) return -1;
  }
  return -1;
}

// Exclusive prefix sum of one value per thread over the block; *total gets the block sum.
// The cross-warp step is one warp scanning kWarps (<= 32) partials: the scan window is bounded by
// the warp count by construction (upstream's wave64 bug came from an unbounded window, PR #23970).
// Three barriers; s_scan[0..32) is scratch and free again on return.
template <int kBlockSize>
__device__ __forceinline__ int32_t block_exclusive_scan(int32_t v, int32_t* s_scan, int32_t* total) {
  constexpr int kWarps = kBlockSize / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  int32_t x = v;
#pragma unroll
  for (int o = 1; o < kWarpSize; o <<= 1) {
    const int32_t y = __shfl_up_sync(0xFFFFFFFFu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == kWarpSize - 1) s_scan[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int32_t w = lane < kWarps ? s_scan[lane] : 0;
#pragma unroll
    for (int o = 1; o < kWarpSize; o <<= 1) {
      const int32_t y = __shfl_up_sync(0xFFFFFFFFu, w, o);
      if (lane >= o) w += y;
    }
    if (lane < kWarps) s_scan[lane] = w;
  }
  __syncthreads();
  const int32_t before = warp > 0 ? s_scan[warp - 1] : 0;
  *total = s_scan[kWarps - 1];
  __syncthreads();
  return before + x - v;
}

// 16-byte loads in flight per thread in the flat copy: 1024 threads move 113 rows of 576 B per pass.
// The same bytes for narrower words would unroll 16 loads' address arithmetic (kScaleNarrow off, as in
// the multi-step commit, which also runs 1024 threads at 64 registers).
constexpr int kSwapCopyInFlight = 4;

// The two copies, kept out of line: the warp copy inlined into the swap kernel (nvcc 13.0, sm_90) raised
// the kernel from 39 to 100 registers at 256 threads and spilled at 1024; out of line the kernel stays at
// 64 with no spills, and one call per item or per CTA is noise next to a ~1 us zero-copy PCIe read.
static __device__ __noinline__ void copy_miss(const void* src, void* dst, uint32_t n, uint32_t lane) {
  warp_copy_item<2>(src, dst, n, lane);
}
template <int kBlockSize>
static __device__ __noinline__ void copy_misses(const void* host_cache, void* device_buffer, uint32_t item_size_bytes,
                                                const int64_t* src_rows, const int32_t* dst_rows, uint32_t count) {
  block_copy_rows<kBlockSize, kSwapCopyInFlight, /*kScaleNarrow=*/false>(host_cache, device_buffer, item_size_bytes,
                                                                        src_rows, dst_rows, count);
}

__device__ __forceinline__ int64_t load_index(const void* p, bool is_i64, int64_t i) {
  return is_i64 ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

}  // namespace lru_detail

// ---------------------------------------------------------------------------------------------
template <int kBlockSize, bool kRecordPlan, bool kCopy, bool kFlatCopy>
__global__ void __launch_bounds__(kBlockSize) swap_single_kernel(const __grid_constant__ SwapSingleParams p) {
  static_assert(kBlockSize % kWarpSize == 0 && kBlockSize >= 64 && kBlockSize <= 1024,
                "block size: a multiple of 32 in [64, 1024]");
  static_assert(kCopy || kRecordPlan, "a swap that does not copy must record the plan its copy reads");
  static_assert(kCopy || !kFlatCopy, "the flat copy is a copy: kFlatCopy needs kCopy");
  using namespace lru_detail;
  constexpr int kWarps = kBlockSize / kWarpSize;
  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize;
  const int warp = tid / kWarpSize;
  const int bid = blockIdx.x;
  const int32_t K = p.top_k;
  const int32_t HOT = p.hot_buffer_size;
  int32_t* out = p.top_k_device_locs + bid * p.out_stride;

  // 0. CUDA-graph padding row (or a request slot outside the pool): define every output, touch
  // nothing else.
  const int64_t rid = bid < *p.num_real_reqs ? load_index(p.req_pool_indices, p.index_i64 & 1u, bid) : -1;
  if (rid < 0 || rid >= p.num_req_slots) {
    for (int i = tid; i < K; i += kBlockSize) out[i] = -1;
    if (kRecordPlan && tid == 0) p.miss_count[bid] = 0;
    return;
  }

  // 1. Request row.
  const int64_t seq_len = load_index(p.seq_lens, p.index_i64 & 2u, bid);
  const int32_t* tokens_in = p.top_k_tokens + bid * p.top_k_stride;
  int32_t* slot_tokens = p.device_buffer_tokens + rid * p.buffer_stride;
  const int32_t* slot_locs = p.device_buffer_locs + rid * p.buffer_stride;

  // 2. Short sequence: position == slot, no LRU change, no copy. Tokens outside the slot table
  // (the contract forbids them) read nothing and give -1.
  if (seq_len <= HOT) {
    const int32_t width = HOT + p.page_size;
    for (int i = tid; i < K; i += kBlockSize) {
      const int32_t t = tokens_in[i];
      out[i] = (i < seq_len && t >= 0 && t < width) ? slot_locs[t] : -1;
    }
    if (kRecordPlan && tid == 0) p.miss_count[bid] = 0;
    return;
  }

  // 3. Shared memory.
  extern __shared__ __align__(16) uint8_t smem[];
  const SwapSmemLayout L = SwapSmemLayout::make(K, HOT, /*even_tokens=*/kFlatCopy);
  auto* s_tokens = reinterpret_cast<int32_t*>(smem);
  auto* s_keys = reinterpret_cast<int32_t*>(smem) + L.off_hash_keys;
  auto* s_chunk_off = reinterpret_cast<int32_t*>(smem) + L.off_chunk_off;
  auto* s_chunk_mask = reinterpret_cast<uint32_t*>(smem) + L.off_chunk_mask;
  auto* s_scan = reinterpret_cast<int32_t*>(smem) + L.off_scan;
  auto* s_lru_out = reinterpret_cast<int16_t*>(smem + L.off_lru_out);
  auto* s_vals = reinterpret_cast<int16_t*>(smem + L.off_hash_vals);
  for (int i = tid; i < L.hash_size; i += kBlockSize) {
    s_keys[i] = kEmpty;
    s_vals[i] = -1;
  }
  __syncthreads();

  // 4. Hash the top-k. The newest token is in the extra page (slot HOT), not in the hot buffer.
  const int32_t newest_loc = slot_locs[HOT];
  const int max_cas = 2 * K + 2;
  for (int i = tid; i < K; i += kBlockSize) {
    const int32_t t = tokens_in[i];
    if (t < 0) {  // outside the contract for long rows; resolved to -1, never a miss
      s_tokens[i] = kHit;
      out[i] = -1;
    } else if (static_cast<int64_t>(t) == seq_len - 1) {
      s_tokens[i] = kHit;
      out[i] = newest_loc;
    } else {
      s_tokens[i] = t;
      hash_insert(s_keys, s_vals, L.hash_log2, t, static_cast<int16_t>(i), max_cas);
    }
  }
  __syncthreads();

  // 5a. LRU scan, pass 1: warp w owns chunks w, w+kWarps, ... of 32 LRU positions. Hits resolve
  // their output now; the chunk's hit mask and count go to shared memory.
  const int16_t* lru = p.lru_slots + rid * HOT;
  for (int c = warp; c < L.chunks; c += kWarps) {
    const int32_t j = c * kWarpSize + lane;
    int32_t idx = -1;
    bool pinned = false;  // a hit, or an entry that is not a slot (kept with the hits, never evicted)
    if (j < HOT) {
      const int32_t slot = lru[j];
      if (slot >= 0 && slot < HOT) {
        idx = hash_lookup(s_keys, s_vals, L.hash_log2, slot_tokens[slot]);
        if (idx >= 0) {
          s_tokens[idx] = kHit;
          out[idx] = slot_locs[slot];
        }
      }
      pinned = idx >= 0 || slot < 0 || slot >= HOT;
    }
    const uint32_t mask = __ballot_sync(0xFFFFFFFFu, pinned);
    if (lane == 0) {
      s_chunk_mask[c] = mask;
      s_chunk_off[c] = __popc(mask);
    }
  }
  __syncthreads();

  // 5b. Chunk hit counts -> exclusive offsets, kBlockSize chunks per round; s_chunk_off[C] = hits.
  int32_t carry = 0;
  for (int base = 0; base < L.chunks; base += kBlockSize) {
    const int c = base + tid;
    const int32_t v = c < L.chunks ? s_chunk_off[c] : 0;
    int32_t total;
    const int32_t ex = block_exclusive_scan<kBlockSize>(v, s_scan, &total);
    if (c < L.chunks) s_chunk_off[c] = carry + ex;
    carry += total;
  }
  __syncthreads();  // the offsets written after the last scan's barriers are read by other warps
  const int32_t total_hits = carry;
  const int32_t num_evictable = HOT - total_hits;

  // 5c. Pass 2: place every slot. Hit h -> s_lru_out[h]; evictable e -> s_lru_out[HOT-1-e], where e
  // counts the non-hits before it in LRU order (= j - hits before j).
  for (int c = warp; c < L.chunks; c += kWarps) {
    const int32_t j = c * kWarpSize + lane;
    if (j < HOT) {
      const uint32_t mask = s_chunk_mask[c];
      const int32_t hits_before = s_chunk_off[c] + __popc(mask & ((1u << lane) - 1u));
      const int16_t slot = lru[j];
      if ((mask >> lane) & 1u) {
        s_lru_out[hits_before] = slot;
      } else {
        s_lru_out[HOT - 1 - (j - hits_before)] = slot;
      }
    }
  }
  __syncthreads();

  // 6. Misses in top-k index order; the m-th takes the m-th least-recently-used evictable. Each round
  // reads its kBlockSize entries before the scan's barriers, then compacts the miss tokens in place
  // (m <= i, and later rounds only read indices above this round's).
  const int64_t* host_locs = p.host_cache_locs + rid * p.max_len;
  int32_t misses = 0;
  for (int base = 0; base < K; base += kBlockSize) {
    const int i = base + tid;
    const int32_t t = i < K ? s_tokens[i] : kHit;
    const bool is_miss = t >= 0;
    int32_t round_misses;
    const int32_t m = misses + block_exclusive_scan<kBlockSize>(is_miss ? 1 : 0, s_scan, &round_misses);
    if (is_miss) {
      // m < num_evictable whenever the contract holds (K <= HOT, unique tokens and residents); an
      // entry past the supply resolves to -1 and is not loaded.
      if (m < num_evictable) {
        const int32_t slot = s_lru_out[HOT - 1 - m];
        const int32_t loc = slot_locs[slot];
        out[i] = loc;
        slot_tokens[slot] = t;
        s_tokens[m] = t;
        if constexpr (kRecordPlan) {
          p.miss_src[bid * p.plan_stride + m] = t < p.max_len ? host_locs[t] : -1;
          p.miss_dst[bid * p.plan_stride + m] = loc;
        }
      } else {
        out[i] = -1;
      }
    }
    misses += round_misses;
  }
  const int32_t num_misses = min(misses, num_evictable);
  if (kRecordPlan && tid == 0) p.miss_count[bid] = num_misses;
  __syncthreads();  // s_tokens[0..M) complete before the copy reads it

  // 7. LRU writeback: E[M:] ++ E[:M] ++ H (E[e] = s_lru_out[HOT-1-e], H[h] = s_lru_out[h]).
  int16_t* lru_w = p.lru_slots + rid * HOT;
  const int32_t kept = num_evictable - num_misses;
  for (int q = tid; q < HOT; q += kBlockSize) {
    int32_t src;
    if (q < kept) {
      src = HOT - 1 - (num_misses + q);
    } else if (q < num_evictable) {
      src = HOT - 1 - (q - kept);
    } else {
      src = q - num_evictable;
    }
    lru_w[q] = s_lru_out[src];
  }

  // 8. Copies. Without kCopy the recorded plan is the input of the planned copy the wrapper launches next
  // over its own grid (copy_blocks), which at batch 1-2 copies on more SMs than this kernel's CTAs.
  if constexpr (!kCopy) return;
  if constexpr (!kFlatCopy) {  // warp w moves misses w, w+kWarps, ...
    for (int m = warp; m < num_misses; m += kWarps) {
      const int32_t t = s_tokens[m];
      const int64_t src_row = t < p.max_len ? host_locs[t] : -1;
      const int32_t dst_row = slot_locs[s_lru_out[HOT - 1 - m]];
      if (src_row < 0 || src_row >= p.host_rows || dst_row < 0 || dst_row >= p.device_rows) continue;  // warp-uniform
      copy_miss(row_ptr(p.host_cache, src_row, p.item_size_bytes),
                row_ptr(p.device_buffer, dst_row, p.item_size_bytes), p.item_size_bytes, lane);
    }
  } else {
    // The flat copy: the CTA lists its pairs (host row of miss m's token -> its victim's row) and copies
    // them with every thread's loads in flight at once, where one warp per row paid a PCIe round trip per
    // row. The hash table is dead since 5a, so its keys take the int64 host rows and s_tokens[0..M) the
    // int32 device rows; pairs outside the buffers are compacted away. Each round reads its entries before
    // the scan's barriers and writes at c <= m, below the next round's.
    auto* s_src = reinterpret_cast<int64_t*>(s_keys);
    int32_t copies = 0;
    for (int base = 0; base < num_misses; base += kBlockSize) {
      const int m = base + tid;
      int64_t src_row = -1;
      int32_t dst_row = -1;
      if (m < num_misses) {
        const int32_t t = s_tokens[m];
        src_row = t < p.max_len ? host_locs[t] : -1;
        dst_row = slot_locs[s_lru_out[HOT - 1 - m]];
      }
      const bool valid = src_row >= 0 && src_row < p.host_rows && dst_row >= 0 && dst_row < p.device_rows;
      int32_t round_copies;
      const int32_t c = copies + block_exclusive_scan<kBlockSize>(valid ? 1 : 0, s_scan, &round_copies);
      if (valid) {
        s_src[c] = src_row;
        s_tokens[c] = dst_row;
      }
      copies += round_copies;
    }
    __syncthreads();
    copy_misses<kBlockSize>(p.host_cache, p.device_buffer, p.item_size_bytes, s_src, s_tokens,
                            static_cast<uint32_t>(copies));
  }
}

}  // namespace hisparse
