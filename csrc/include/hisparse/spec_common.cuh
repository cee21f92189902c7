// Multi-step (speculative) swap: the pieces shared by the gather and the commit kernels.
// Framework-free device code (no tvm/torch).
//
// State layout: hisparse/state.py (its docstring is the contract). Per request slot rid:
//   hash_index [R,2,H] int64  two cuckoo banks, entry (slot << 32) | uint32(token), < 0 = empty
//   ref_epochs [R,HOT] int32  CLOCK: epoch of the slot's last reference (0 = never)
//   clock      [R,2]   int32  [epoch of the last call, CLOCK cursor]
//   counters   [R,4]   int32  [last unique-miss count, work counter, union-hit counter, flags]
//   scratch_locs [R,C] int32  device rows owned as scratch, rotated with evicted hot rows
//   miss_keys/miss_vals [R,M] int64, miss_order [R,T] int32: epoch-tagged per-call workspace
// flags bit 0 = hash degraded (persistent). flags bit 1 = kFlagPending (ours, transient: set by a
// gather CTA that left an output pending, cleared by the commit of the same call). flags bits 8-15 =
// gather CTAs of this call past their lookups (ours, transient: the commit starts on this count, not
// on the gather's completion, and clears it).
#pragma once

#include <cstdint>

namespace hisparse::spec {

constexpr int32_t kEpochMask = 0x7FFFFFFF;
constexpr uint32_t kHashMult = 2654435761u;  // Knuth's multiplier; also the primary cuckoo hash

// miss_order[u] = table position (low 14 bits: M <= 16384 = next_pow2(2 * 8192)) | flags.
constexpr uint32_t kOrderPosMask = (1u << 14) - 1;
constexpr int32_t kOrderClaim = 1 << 29;  // approximate mode: some last-step occurrence saw u
constexpr int32_t kOrderAdmit = 1 << 30;  // approximate mode: u is admitted (rotated into the hot buffer)

constexpr int kCounterLastMisses = 0, kCounterWork = 1, kCounterUnionHits = 2, kCounterFlags = 3;
constexpr int32_t kFlagDegraded = 1;
constexpr int32_t kFlagPending = 2;
constexpr int kLookupsShift = 8;
constexpr int32_t kFlagLookupsOne = 1 << kLookupsShift;    // one gather CTA past its lookups
constexpr int32_t kFlagLookupsMask = 0xFF << kLookupsShift;  // gather_tiles <= 128 (8192 / 64)

// Output codes besides a device row. -2 never leaves the call: the commit rewrites every -2 it finds.
constexpr int32_t kOutUnresolved = -1;
constexpr int32_t kOutPending = -2;  // a miss whose row the commit resolves (overflow, or spin timeout)

constexpr uint32_t kRowUnresolved = 0xFFFFFFFFu;  // low word of miss_vals after the commit: no row
constexpr int kAgeBuckets = 64;                   // union-mode victim ages: 63 calls and more tie (reference AGE_BUCKETS)
constexpr int kClockSamples = 6;                  // CLOCK samples per union-mode partition (upstream)
// Union mode takes the oldest slots up to this HOT and upstream's partitioned CLOCK above it: the
// oldest-slot scan costs ~0.5 us per 1024 slots, and the rows it saves shrink as HOT grows (reference
// OLDEST_LINE_HOT; results/probes/oldest-victims-h200-20261201/).
constexpr int32_t kOldestLineHot = 16384;
constexpr int kMaxKicks = 64;                     // cuckoo kick chain bound (upstream)
constexpr int kCasRetries = 8;                    // re-reads of one bucket before kicking
// A gather lane that finds a miss claimed in this epoch but not yet published waits at most this
// many rounds (each >= one L2 round trip + kSpinSleepNs), then leaves its output pending (-2): no
// unbounded spin, so correctness never depends on the scheduler (docs/semantics.md §7.4).
constexpr int kSpinLimit = 128;
constexpr unsigned kSpinSleepNs = 64;
// The commit polls its request's lookup count at most this many times (each >= one L2 round trip +
// kSpinSleepNs), then falls back to griddepcontrol.wait (the gather's completion). Under PDL the commit
// grid launches only after every gather CTA has counted itself, so the first poll or two succeed; the
// bound only keeps a mis-sized count (a request slot twice in one batch) from ever hanging.
constexpr int kLookupSpinLimit = 1024;
// Approximate-mode probes per miss before the CTA-wide fallback (see spec_commit.cuh).
constexpr int kApproxProbeLimit = 32;

// Kernel arguments of both kernels (passed as __grid_constant__). Strides are in elements.
struct SwapMultiParams {
  const int32_t* top_k_tokens;  // [bs, S, K], row stride top_k_stride, inner [S, K] contiguous
  int32_t* out;                 // top_k_device_locs, [bs, S, K], row stride out_stride
  int32_t* buffer_tokens;       // device_buffer_tokens [>=R, HOT + page], row stride buffer_stride
  int32_t* buffer_locs;         // device_buffer_locs, same shape and row stride
  const int64_t* host_cache_locs;  // [>=R, max_len], contiguous
  const void* host_cache;          // pinned host (UVA address) or device, row r at r * item_size_bytes
  void* device_buffer;             // device, row r at r * item_size_bytes
  const void* req_pool_indices;    // [bs] int32 or int64 (index_i64 bit 0)
  const void* seq_lens;            // [bs * S] int32 or int64 (index_i64 bit 1)
  const int32_t* num_real_reqs;    // [1]
  int64_t* hash_index;             // [R, 2, H]
  int32_t* ref_epochs;             // [R, HOT]
  int32_t* clock;                  // [R, 2]
  int32_t* counters;               // [R, 4]
  int32_t* scratch_locs;           // [R, C]
  int64_t* miss_keys;              // [R, M]
  int64_t* miss_vals;              // [R, M]
  int32_t* miss_order;             // [R, T]
  int64_t* miss_src;               // [>=bs, >=T], row stride plan_stride_src (kRecordPlan only)
  int32_t* miss_dst;               // [>=bs, >=T], row stride plan_stride_dst
  int32_t* miss_count;             // [>=bs]
  int64_t top_k_stride;
  int64_t out_stride;
  int64_t buffer_stride;
  int64_t max_len;
  int64_t host_rows;    // whole items in host_cache: host rows outside [0, host_rows) count as missing
  int64_t device_rows;  // whole items in device_buffer: rows outside are never written
  int64_t plan_stride_src;
  int64_t plan_stride_dst;
  int32_t batch;
  int32_t steps;
  int32_t top_k;
  int32_t occurrences;  // T = steps * top_k
  int32_t hot;          // HOT
  int32_t page_size;
  int32_t capacity;     // C
  int32_t num_req_slots;
  uint32_t hash_mask;   // H - 1
  uint32_t miss_mask;   // M - 1
  uint32_t item_size_bytes;
  int32_t gather_tiles;  // gather CTAs per request
  int32_t copy_after_lookups;  // 1: a gather CTA copies once its request's CTAs are all past their lookups
  uint32_t index_i64;    // bit 0: req_pool_indices is int64; bit 1: seq_lens is int64
};

__device__ __forceinline__ int64_t load_index(const void* p, bool is_i64, int64_t i) {
  return is_i64 ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

// Request slot of batch row b, or -1 for padding rows and out-of-range slots (both leave state alone).
// Both loads are issued together (b < batch, so req_pool_indices[b] is in bounds for padding rows too):
// one round trip before any per-request state, not two.
__device__ __forceinline__ int64_t request_slot(const SwapMultiParams& p, int b) {
  const int32_t num_real = *p.num_real_reqs;
  const int64_t rid = load_index(p.req_pool_indices, p.index_i64 & 1u, b);
  if (b >= num_real) return -1;
  return (rid >= 0 && rid < p.num_req_slots) ? rid : -1;
}

// Epoch of the call after `epoch`: +1 in 31 bits, never 0 (0 = never referenced). Same as state.next_epoch.
__device__ __forceinline__ int32_t next_epoch(int32_t epoch) {
  const int32_t e = (epoch + 1) & kEpochMask;
  return e != 0 ? e : 1;
}

__device__ __forceinline__ bool valid_row(int64_t row, int64_t rows) { return row >= 0 && row < rows; }

// Plain (non-cached-in-L1) 64-bit load for words other threads update with atomics in this kernel.
__device__ __forceinline__ uint64_t load_volatile(const int64_t* p) {
  return *reinterpret_cast<const volatile unsigned long long*>(p);
}
__device__ __forceinline__ int32_t load_volatile32(const int32_t* p) { return *reinterpret_cast<const volatile int32_t*>(p); }

// Whether every gather CTA of this call has counted its lookups in its request's flags (bits 8-15).
// Polled by the commit (wait_for_lookups) and, at small batches, by the gather (wait_request_lookups).
__device__ __forceinline__ bool lookups_counted(const SwapMultiParams& p, const int32_t* counters) {
  return ((load_volatile32(counters + kCounterFlags) & kFlagLookupsMask) >> kLookupsShift) >= p.gather_tiles;
}
__device__ __forceinline__ unsigned long long* as_ull(int64_t* p) { return reinterpret_cast<unsigned long long*>(p); }

__device__ __forceinline__ uint64_t epoch_tag(int32_t epoch, uint32_t low) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(epoch)) << 32) | low;
}
__device__ __forceinline__ bool has_epoch(uint64_t word, int32_t epoch) {
  return static_cast<uint32_t>(word >> 32) == static_cast<uint32_t>(epoch);
}

__device__ __forceinline__ uint32_t miss_hash(int32_t token) { return static_cast<uint32_t>(token) * kHashMult; }

// ---------------------------------------------------------------------------------------------
// Per-request views.

struct HotView {
  const int32_t* tokens;  // device_buffer_tokens row (hot part [0, HOT), extra page [HOT, HOT + page))
  const int32_t* locs;    // device_buffer_locs row
  const int64_t* bank0;
  const int64_t* bank1;
  uint32_t hash_mask;
  int32_t hot;
  int32_t page_size;
  bool degraded;
};

__device__ __forceinline__ HotView hot_view(const SwapMultiParams& p, int64_t rid, bool degraded) {
  const int64_t h = static_cast<int64_t>(p.hash_mask) + 1;
  HotView v;
  v.tokens = p.buffer_tokens + rid * p.buffer_stride;
  v.locs = p.buffer_locs + rid * p.buffer_stride;
  v.bank0 = p.hash_index + rid * 2 * h;
  v.bank1 = v.bank0 + h;
  v.hash_mask = p.hash_mask;
  v.hot = p.hot;
  v.page_size = p.page_size;
  v.degraded = degraded;
  return v;
}

}  // namespace hisparse::spec
