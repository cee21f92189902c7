// Multi-step swap, kernel 2 of 2: the commit (docs/semantics.md §3.7 with our state layout).
//
// One CTA of kCommitThreads per request; launched after the gather (PDL when kPdl). Under PDL it
// starts once its request's gather CTAs have all counted themselves past their lookups (flags bits
// 8-15, wait_for_lookups), while their copies into scratch rows are still in flight: the commit never
// reads those rows (rotation renames them, direct copies write victims' own rows), so it overlaps the
// gather's last copies instead of following them. It ends with pdl_wait_primary, so the swap as a
// whole completes only when every row has landed.
// Same policy as hisparse/reference/swap_multi_commit.py (mode, sampling, admission, rotation); the
// unique-miss order u (atomicAdd order in the gather) and collision losers differ run to run.
//
// Phases, separated by __syncthreads (one CTA owns the request, so a barrier orders everything):
//   A  approximate mode only: clear refs unless overflow; last step: protect hits, number the
//      distinct last-step misses u < C (CLAIM flag, CTA ordinal) and admit the first `budget`.
//   B  primary victim per active miss (rotate: u < C and (union mode or admitted); direct: u >= C):
//      union mode up to HOT kOldestLineHot takes the `misses` oldest unprotected slots CTA-wide (an age
//      histogram, then ring order from the cursor on the threshold age; oldest_victims) and hands them
//      out in ring order; above it each miss samples <= 6 slots of its residue class (upstream's CLOCK,
//      union_victim); approximate mode probes (linear * 2654435761 + epoch) % HOT for linear = ordinal, ordinal +
//      count, ... Every approximate claim is an atomicCAS of ref from the value seen to the epoch, so no
//      slot is claimed twice for any HOT (the approximate map is not a bijection unless HOT is a power
//      of two; docs/semantics.md §7.6); union-mode claims have one writer per slot.
//   C  fallback for misses still without a victim: one CTA-wide sweep of the ring from the cursor,
//      ranking unprotected slots with a block prefix count and handing the k-th to the k-th needy
//      miss. Exact (a victim whenever an unprotected slot exists), no CAS, O(HOT / threads) steps;
//      upstream's per-thread probe could loop over all of HOT with a global load per step.
//   D  apply: rotate (slot takes the scratch row that already holds the data, scratch takes the
//      slot's old row: no copy) or direct (slot keeps its row, host -> row copy now, warp-batched);
//      erase the old token's cuckoo entry; miss_vals[pos] = epoch | row, valid for the rest of the
//      call, when phase G will read it (overflow or a pending output); plan entries of u >= C.
//   E  cuckoo inserts of the new tokens (after every erase).
//   F  if the index was degraded or an insert dropped an entry: rebuild it from the slot table.
//   G  outputs left at -2 by the gather (overflow misses, spin timeouts) <- miss_vals.
//   finalize: last miss count, counters reset, flags, clock = (epoch, cursor + min(misses, HOT)).
//
// Why every returned row stays valid for the call: hits are protected (ref == epoch; refs are only
// wiped in approximate mode without overflow, where nothing is overwritten in place); rotation never
// overwrites a row; direct copies only overwrite unprotected victims' own rows, which no output of
// this call names.
#pragma once

#include <cstdint>

#include "hisparse/copy_rows.cuh"
#include "hisparse/cuckoo.cuh"
#include "hisparse/pdl.cuh"
#include "hisparse/spec_common.cuh"

namespace hisparse::spec {

constexpr int kCommitThreads = 1024;  // 782 misses (the benchmark case) in one pass per phase
constexpr int kCommitWarps = kCommitThreads / kWarpSize;
constexpr int kCommitInFlight = 4;  // direct-overflow copies: 16-byte loads in flight per lane

// Dynamic shared memory of the commit: int16 victim[T] | uint16 needy[T] | int8 age[HOT] (union mode
// up to kOldestLineHot; none above, where the CLOCK needs no ages).
__host__ __device__ constexpr size_t commit_smem_bytes(int occurrences, int hot) {
  const size_t ages = hot <= kOldestLineHot ? static_cast<size_t>(hot) * sizeof(int8_t) : 0;
  return static_cast<size_t>(occurrences) * (sizeof(int16_t) + sizeof(uint16_t)) + ages;
}
constexpr int16_t kNoVictim = -1;
constexpr int16_t kNeedsFallback = -2;

// Table position of `token` in this call's miss table, or -1 (read-only probe; keys are never
// removed during a call, so an entry of an older epoch ends the probe).
__device__ __forceinline__ int32_t miss_find(const int64_t* keys, uint32_t mask, int32_t epoch, int32_t token) {
  const uint64_t want = epoch_tag(epoch, static_cast<uint32_t>(token));
  uint32_t pos = miss_hash(token) & mask;
  for (uint32_t probes = 0; probes <= mask; ++probes) {
    const uint64_t k = load_volatile(keys + pos);
    if (k == want) return static_cast<int32_t>(pos);
    if (!has_epoch(k, epoch)) return -1;
    pos = (pos + 1) & mask;
  }
  return -1;
}

// Warp 0 turns the per-warp totals in s_scan[0..kCommitWarps) into their exclusive prefix and writes
// the CTA total to s_scan[kCommitWarps]. Between the two barriers of a block scan.
__device__ __forceinline__ void scan_warp_totals(uint32_t* s_scan) {
  const uint32_t lane = threadIdx.x % kWarpSize;
  if (threadIdx.x / kWarpSize != 0) return;
  const uint32_t mine = lane < kCommitWarps ? s_scan[lane] : 0;
  uint32_t incl = mine;
#pragma unroll
  for (int d = 1; d < kWarpSize; d <<= 1) {
    const uint32_t n = __shfl_up_sync(0xFFFFFFFFu, incl, d);
    if (lane >= static_cast<uint32_t>(d)) incl += n;
  }
  if (lane < kCommitWarps) s_scan[lane] = incl - mine;
  if (lane == kWarpSize - 1) s_scan[kCommitWarps] = incl;
}

// Rank of this thread among the CTA's threads with `flag` set (in thread order) and their total.
// Contains three __syncthreads: call from uniform control flow.
__device__ __forceinline__ uint32_t block_exclusive_rank(bool flag, uint32_t* s_scan, uint32_t& total) {
  const uint32_t lane = threadIdx.x % kWarpSize;
  const uint32_t warp = threadIdx.x / kWarpSize;
  const unsigned ballot = __ballot_sync(0xFFFFFFFFu, flag);
  if (lane == 0) s_scan[warp] = __popc(ballot);
  __syncthreads();
  scan_warp_totals(s_scan);
  __syncthreads();
  const uint32_t rank = s_scan[warp] + __popc(ballot & ((1u << lane) - 1u));
  total = s_scan[kCommitWarps];
  __syncthreads();  // s_scan is rewritten by the next call
  return rank;
}

// Exclusive prefix sum of `v` over the CTA's threads (in thread order) and its total. Contains three
// __syncthreads: call from uniform control flow.
__device__ __forceinline__ uint32_t block_exclusive_sum(uint32_t v, uint32_t* s_scan, uint32_t& total) {
  const uint32_t lane = threadIdx.x % kWarpSize;
  const uint32_t warp = threadIdx.x / kWarpSize;
  uint32_t incl = v;
#pragma unroll
  for (int d = 1; d < kWarpSize; d <<= 1) {
    const uint32_t n = __shfl_up_sync(0xFFFFFFFFu, incl, d);
    if (lane >= static_cast<uint32_t>(d)) incl += n;
  }
  if (lane == kWarpSize - 1) s_scan[warp] = incl;
  __syncthreads();
  scan_warp_totals(s_scan);
  __syncthreads();
  const uint32_t rank = s_scan[warp] + incl - v;
  total = s_scan[kCommitWarps];
  __syncthreads();  // s_scan is rewritten by the next call
  return rank;
}

static_assert(kAgeBuckets == 2 * kWarpSize, "threshold_age: two age buckets per lane");

// Warp 0: the threshold age T of the histogram (every age > T is taken) and how many slots of age T,
// `need`, into s_cut[0..1]. S(a) = slots of age >= a; T = the largest a with S(a) >= misses, need =
// misses - S(T + 1); when every unprotected slot is too few, T = 0 and need = s_hist[0] (take them all).
// One suffix scan over the lanes (two buckets each) instead of a 64-step loop in one thread.
__device__ __forceinline__ void threshold_age(const uint32_t* s_hist, int32_t misses, int32_t* s_cut) {
  const uint32_t lane = threadIdx.x % kWarpSize;
  const uint32_t lo = s_hist[2 * lane], hi = s_hist[2 * lane + 1];
  uint32_t suffix = lo + hi;  // inclusive suffix over lanes >= lane of the pair sums
#pragma unroll
  for (int d = 1; d < kWarpSize; d <<= 1) {
    const uint32_t n = __shfl_down_sync(0xFFFFFFFFu, suffix, d);
    if (lane + d < static_cast<uint32_t>(kWarpSize)) suffix += n;
  }
  const uint32_t s_lo = suffix, s_hi = suffix - lo;  // S(2 lane), S(2 lane + 1)
  const uint32_t want = static_cast<uint32_t>(misses);
  const unsigned reach = __ballot_sync(0xFFFFFFFFu, s_lo >= want);
  if (reach == 0) {
    if (lane == 0) {
      s_cut[0] = 0;
      s_cut[1] = static_cast<int32_t>(lo);
    }
    return;
  }
  if (lane == static_cast<uint32_t>(kWarpSize - 1 - __clz(reach))) {  // the highest lane that reaches
    const bool upper = s_hi >= want;
    s_cut[0] = static_cast<int32_t>(2 * lane + (upper ? 1 : 0));
    s_cut[1] = misses - static_cast<int32_t>(upper ? s_hi - hi : s_lo - lo);
  }
}

// Calls since a slot was last referenced (epochs wrap at kEpochMask): the age both victim policies rank.
__device__ __forceinline__ int32_t epoch_age(int32_t seen, int32_t epoch) {
  return static_cast<int32_t>((static_cast<uint32_t>(epoch) - static_cast<uint32_t>(seen)) & kEpochMask);
}

__device__ __forceinline__ int32_t age_of(int32_t seen, int32_t epoch) {
  if (seen == epoch) return -1;  // protected: referenced by this call
  return min(epoch_age(seen, epoch), kAgeBuckets - 1);
}

constexpr int kAgeLoads = 4;  // ref words per thread per pass, all in flight together

static_assert(kOldestLineHot < (1 << 16), "oldest_victims packs two per-run counts of <= HOT into 16 bits each");

// Thread tid's ref words of ring positions j * kCommitThreads + tid, j < kAgeLoads, from `cursor`
// (positions >= hot read as `epoch_hint`, i.e. protected; hot = 0 loads nothing). Loaded as soon as
// the gather's marks are complete, with the request's counters, before the commit knows whether it
// takes the oldest slots: the loads are only reads, and their round trip then overlaps the counters'
// instead of following it.
struct RingAges {
  int32_t seen[kAgeLoads];
};
__device__ __forceinline__ int32_t ring_slot(int32_t cursor, int32_t hot, int32_t i) {
  return cursor + i >= hot ? cursor + i - hot : cursor + i;
}
__device__ __forceinline__ RingAges load_ring_ages(const int32_t* ref, int32_t epoch_hint, int32_t cursor, int32_t hot, int32_t base) {
  RingAges a;
#pragma unroll
  for (int j = 0; j < kAgeLoads; ++j) {  // every load issued before any use
    const int32_t i = base + j * kCommitThreads + static_cast<int32_t>(threadIdx.x);
    // The gather's marks are complete (its lookups are counted) and this CTA has not read these
    // lines: L2 loads.
    a.seen[j] = i < hot ? __ldcg(ref + ring_slot(cursor, hot, i)) : epoch_hint;
  }
  return a;
}

// Union mode (§3.7.4): the `misses` unprotected slots of largest age (clamped at kAgeBuckets - 1), ties
// in ring order from the cursor, handed to misses 0, 1, ... in ring order (reference
// clock.oldest_victims): a call-granular exact LRU. One CTA owns the request, so no claim can race
// and ref is written plainly.
// One coalesced pass over ref puts each ring position's age in shared memory (int8, ring order from
// the cursor) and builds the age histogram (warp-aggregated: most slots share a few ages); the
// threshold age T and how many slots of age T are needed follow. Then each thread owns a contiguous
// run of ring positions, so thread order is ring order: one pass over shared memory counts each run's
// slots older than T and of age T, one block scan of both counts (packed) ranks them, and a last pass
// claims them.
// Why not upstream's partitioned CLOCK: each miss saw only its residue class (~HOT / misses slots),
// which on `serving` copied 5-6% more rows per call (results/probes/victim-policy-cpu-20261201/).
// Why shared memory: the first version re-read ref in every pass, in thread-contiguous runs (32
// sectors per warp load) and volatile (one load in flight): +1.1 us at batch 1 and +11 us at hot
// 16384 batch 8 on the H200 (run-oldest.sh, 2026-12-01).
// `after_ages` runs in every thread once its age loads are consumed (the commit issues its next
// prefetch there, so that the round trip overlaps the rest of the selection).
// The first pass's loads come from the caller (RingAges, issued with the request's counters).
template <typename AfterAges>
__device__ __forceinline__ void oldest_victims(int32_t* ref, int32_t epoch, int32_t cursor, int32_t hot, int32_t misses,
                                               const RingAges& first_pass, int8_t* s_age, int16_t* s_victim,
                                               uint32_t* s_hist, uint32_t* s_scan, int32_t* s_cut, AfterAges&& after_ages) {
  if (misses == 0) return;  // uniform: a call without misses needs no pass over the ring
  const int32_t tid = static_cast<int32_t>(threadIdx.x);
  const uint32_t lane = threadIdx.x % kWarpSize;
  const auto slot_at = [&](int32_t i) { return ring_slot(cursor, hot, i); };
  if (tid < kAgeBuckets) s_hist[tid] = 0;
  __syncthreads();
  for (int32_t base = 0; base < hot; base += kCommitThreads * kAgeLoads) {  // uniform trip count
    const RingAges pass = base == 0 ? first_pass : load_ring_ages(ref, epoch, cursor, hot, base);
    const int32_t* seen = pass.seen;
#pragma unroll
    for (int j = 0; j < kAgeLoads; ++j) {
      const int32_t i = base + j * kCommitThreads + tid;
      const int32_t a = i < hot ? age_of(seen[j], epoch) : -1;
      if (i < hot) s_age[i] = static_cast<int8_t>(a);
      const uint32_t same = __match_any_sync(0xFFFFFFFFu, a);
      if (a >= 0 && lane == static_cast<uint32_t>(__ffs(same) - 1)) atomicAdd(&s_hist[a], static_cast<uint32_t>(__popc(same)));
    }
  }
  after_ages();
  __syncthreads();
  if (tid < kWarpSize) threshold_age(s_hist, misses, s_cut);
  __syncthreads();
  const int32_t t = s_cut[0], need = s_cut[1];
  const int32_t per = (hot + kCommitThreads - 1) / kCommitThreads;
  const int32_t lo = min(hot, tid * per), hi = min(hot, lo + per);
  uint32_t older = 0, at_t = 0;
  for (int32_t i = lo; i < hi; ++i) {
    const int32_t a = s_age[i];
    older += a > t ? 1u : 0u;
    at_t += a == t ? 1u : 0u;
  }
  // One scan of both counts, packed (older << 16 | at_t; a prefix is <= HOT < 2^16, so no carry): the
  // slots of age T taken are the first `need` in ring order, so the runs before this one took
  // min(need, t_rank) of them and this run takes the next take_t. (Two scans before: 3 barriers more.)
  uint32_t packed_total = 0;
  const uint32_t packed = block_exclusive_sum((older << 16) | at_t, s_scan, packed_total);
  const int32_t t_rank = static_cast<int32_t>(packed & 0xFFFFu);
  const int32_t take_t = max(0, min(need - t_rank, static_cast<int32_t>(at_t)));
  uint32_t out = (packed >> 16) + static_cast<uint32_t>(min(need, t_rank));
  const uint32_t total = (packed_total >> 16) + static_cast<uint32_t>(min(need, static_cast<int32_t>(packed_total & 0xFFFFu)));
  int32_t k = 0;
  for (int32_t i = lo; i < hi; ++i) {
    const int32_t a = s_age[i];
    if (a > t || (a == t && k++ < take_t)) {
      const int32_t slot = slot_at(i);
      s_victim[out++] = static_cast<int16_t>(slot);
      ref[slot] = epoch;  // sole writer: each slot is in one thread's run
    }
  }
  for (int32_t c = static_cast<int32_t>(total) + tid; c < misses; c += kCommitThreads) s_victim[c] = kNoVictim;
}

// Union mode above kOldestLineHot (§3.7.4): samples of the residue class cidx (mod misses) of ring positions; oldest
// unprotected wins, first on ties (as reference clock.union_victims). Classes of different misses are
// disjoint, so the CAS cannot fail here; it is kept so that no path claims without one.
__device__ __forceinline__ int32_t union_victim(int32_t* ref, int32_t epoch, int32_t cursor, int32_t hot, int32_t misses,
                                                int32_t cidx) {
  const int32_t size = (hot - 1 - cidx) / misses + 1;
  const int32_t samples = min(size, kClockSamples);
  int32_t cand[kClockSamples];
  int32_t seen[kClockSamples];
#pragma unroll
  for (int s = 0; s < kClockSamples; ++s) {  // all sample loads issued before any decision
    cand[s] = -1;
    seen[s] = epoch;
    if (s < samples) {
      int32_t slot = cursor + cidx + (s * size / samples) * misses;  // < 2 * HOT
      if (slot >= hot) slot -= hot;
      cand[s] = slot;
      seen[s] = load_volatile32(ref + slot);
    }
  }
  int32_t best = -1, best_seen = 0, best_age = -1;
#pragma unroll
  for (int s = 0; s < kClockSamples; ++s) {
    if (cand[s] >= 0 && seen[s] != epoch) {
      const int32_t age = epoch_age(seen[s], epoch);
      if (age > best_age) {
        best = cand[s];
        best_seen = seen[s];
        best_age = age;
      }
    }
  }
  if (best >= 0 && atomicCAS(ref + best, best_seen, epoch) == best_seen) return best;
  return -1;
}

// Approximate mode (§3.7.5): first unprotected slot of the multiplicative probe that this thread
// wins by CAS; bounded (the CTA-wide fallback finishes the rare long searches).
__device__ __forceinline__ int32_t approx_victim(int32_t* ref, int32_t epoch, int32_t hot, int32_t count, int32_t ordinal) {
  int probes = 0;
  for (int32_t linear = ordinal; linear < hot && probes < kApproxProbeLimit; linear += count, ++probes) {
    const int32_t cand = static_cast<int32_t>(
        (static_cast<uint32_t>(linear) * kHashMult + static_cast<uint32_t>(epoch)) % static_cast<uint32_t>(hot));
    const int32_t seen = load_volatile32(ref + cand);
    if (seen != epoch && atomicCAS(ref + cand, seen, epoch) == seen) return cand;
  }
  return -1;
}

// Phase C: hands unprotected slots, in ring order from the cursor, to the needy misses. Uniform
// control flow (every thread computes the same `base` from the block totals).
__device__ __forceinline__ void fallback_victims(int32_t* ref, int32_t epoch, int32_t cursor, int32_t hot, uint32_t needy,
                                                 const uint16_t* s_needy, int16_t* s_victim, uint32_t* s_scan) {
  uint32_t base = 0;
  for (int32_t chunk = 0; chunk < hot && base < needy; chunk += kCommitThreads) {
    const int32_t linear = chunk + static_cast<int32_t>(threadIdx.x);
    int32_t slot = -1;
    bool free_slot = false;
    if (linear < hot) {
      slot = cursor + linear;
      if (slot >= hot) slot -= hot;
      free_slot = load_volatile32(ref + slot) != epoch;
    }
    uint32_t total = 0;
    const uint32_t rank = block_exclusive_rank(free_slot, s_scan, total);
    if (free_slot && base + rank < needy) {
      s_victim[s_needy[base + rank]] = static_cast<int16_t>(slot);
      ref[slot] = epoch;  // sole writer of this slot in this phase
    }
    base += total;
  }
  for (uint32_t i = min(base, needy) + threadIdx.x; i < needy; i += kCommitThreads) s_victim[s_needy[i]] = kNoVictim;
}

// Blocks the CTA until the gather's lookups of this request are visible: under PDL, a poll of the
// request's lookup count (the pattern of cooperative groups' grid sync: one thread polls, fences, and a
// barrier releases the rest), bounded, with the grid-wide wait as the fallback. Without PDL, stream
// order already gave the gather's completion. Uniform control flow.
template <bool kPdl>
__device__ __forceinline__ void wait_for_lookups(const SwapMultiParams& p, const int32_t* counters, int32_t* s_ready) {
  if constexpr (kPdl) {
    if (threadIdx.x == 0) {
      int32_t ready = 0;
      for (int spin = 0; spin < kLookupSpinLimit && !ready; ++spin) {
        if (lookups_counted(p, counters)) {
          ready = 1;
        } else {
          __nanosleep(kSpinSleepNs);
        }
      }
      __threadfence();
      *s_ready = ready;
    }
    __syncthreads();
    if (*s_ready == 0) pdl_wait_primary<kPdl>();
  }
}

// One load of the first word of each of the request's state arrays, one thread per array, results
// unused (asm volatile: kept, and never waited for). Issued before the wait for the lookup counts, so
// that the address translation of each array is cached before the gather's copies fill the GPU's
// translation machinery with host pages; the phases after the wait then find them (see the gather's
// dependent-launch trigger). It recomputes the slices the kernel names after the wait: naming them
// before it kept them live across the wait's poll, +4 bytes of spill in every build (ptxas -v, sm_90).
__device__ __forceinline__ void touch(const void* ptr) {
  uint32_t v;
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(ptr));
}
__device__ __forceinline__ void touch_request_state(const SwapMultiParams& p, int64_t rid, int b) {
  const int64_t m = static_cast<int64_t>(p.miss_mask) + 1;
  const int64_t h = static_cast<int64_t>(p.hash_mask) + 1;
  switch (threadIdx.x) {
    case 0: touch(p.ref_epochs + rid * p.hot); break;
    case 1: touch(p.miss_keys + rid * m); break;
    case 2: touch(p.miss_vals + rid * m); break;
    case 3: touch(p.miss_order + rid * p.occurrences); break;
    case 4: touch(p.buffer_tokens + rid * p.buffer_stride); break;
    case 5: touch(p.buffer_locs + rid * p.buffer_stride); break;
    case 6: touch(p.hash_index + rid * 2 * h); break;
    case 7: touch(p.hash_index + rid * 2 * h + h); break;
    case 8: if (p.capacity > 0) touch(p.scratch_locs + rid * p.capacity); break;
    case 9: touch(p.out + static_cast<int64_t>(b) * p.out_stride); break;
    case 10: touch(p.top_k_tokens + static_cast<int64_t>(b) * p.top_k_stride); break;
    case 11: if (p.max_len > 0) touch(p.host_cache_locs + rid * p.max_len); break;
    default: break;
  }
}

template <bool kPdl, bool kRecordPlan>
__global__ void __launch_bounds__(kCommitThreads, 1) spec_commit_kernel(const __grid_constant__ SwapMultiParams p) {

  extern __shared__ int16_t s_dyn[];
  int16_t* s_victim = s_dyn;                                         // [T]
  uint16_t* s_needy = reinterpret_cast<uint16_t*>(s_dyn + p.occurrences);  // [T]
  int8_t* s_age = reinterpret_cast<int8_t*>(s_needy + p.occurrences);       // [HOT]
  __shared__ uint32_t s_scan[kCommitWarps + 1];
  __shared__ int32_t s_ordinal;
  __shared__ uint32_t s_needy_count;
  __shared__ int32_t s_insert_failed;
  __shared__ int32_t s_rebuild_failed;
  __shared__ uint32_t s_direct_count;
  __shared__ int64_t s_copy_src[kCommitThreads];
  __shared__ int32_t s_copy_dst[kCommitThreads];
  __shared__ int32_t s_ready;
  __shared__ uint32_t s_hist[kAgeBuckets];
  __shared__ int32_t s_cut[2];

  const int b = static_cast<int>(blockIdx.x);
  const int64_t rid = request_slot(p, b);  // inputs only: nothing the gather writes
  if (rid < 0) {  // padding row: the gather wrote its outputs and plan count
    pdl_wait_primary<kPdl>();
    return;
  }
  const int tid = static_cast<int>(threadIdx.x);

  // Per-request state. Every thread reads the same words; they are written only in finalize. The
  // clock is read before the wait: the gather only reads it, so its round trip overlaps the poll's.
  int32_t* counters = p.counters + rid * 4;
  const int32_t hot = p.hot;
  const int32_t cap = p.capacity;
  const int32_t epoch = next_epoch(p.clock[rid * 2]);
  int32_t cursor = p.clock[rid * 2 + 1] % hot;
  if (cursor < 0) cursor += hot;
  touch_request_state(p, rid, b);
  wait_for_lookups<kPdl>(p, counters, &s_ready);
  const int32_t misses = min(max(counters[kCounterWork], 0), p.occurrences);
  const int32_t union_hits = min(max(counters[kCounterUnionHits], 0), hot);
  const int32_t flags = counters[kCounterFlags];
  const bool degraded_in = (flags & kFlagDegraded) != 0;
  const bool overflow = misses > cap;
  const bool union_mode = misses + union_hits <= hot;  // the whole union fits
  const int32_t mandatory_direct = overflow ? misses - cap : 0;
  const int32_t budget = union_mode ? 0 : (overflow ? max(0, hot - union_hits - mandatory_direct) : hot);

  int32_t* ref = p.ref_epochs + rid * hot;
  // Phase B's first age pass, in flight with the counters above (used only when it takes the oldest
  // slots; see load_ring_ages).
  const RingAges first_ages = load_ring_ages(ref, epoch, cursor, hot <= kOldestLineHot ? hot : 0, 0);
  int32_t* scratch = p.scratch_locs + rid * cap;
  const int64_t m = static_cast<int64_t>(p.miss_mask) + 1;
  const int64_t* keys = p.miss_keys + rid * m;
  int64_t* vals = p.miss_vals + rid * m;
  int32_t* order = p.miss_order + rid * p.occurrences;
  int32_t* slot_tokens = p.buffer_tokens + rid * p.buffer_stride;
  int32_t* slot_locs = p.buffer_locs + rid * p.buffer_stride;
  const int64_t h = static_cast<int64_t>(p.hash_mask) + 1;
  int64_t* bank0 = p.hash_index + rid * 2 * h;
  int64_t* bank1 = bank0 + h;
  const HotView hv = hot_view(p, rid, degraded_in);
  const int32_t* tokens = p.top_k_tokens + static_cast<int64_t>(b) * p.top_k_stride;
  int32_t* out = p.out + static_cast<int64_t>(b) * p.out_stride;

  // Phase D's words of this thread's first miss (c = tid), issued early so that their two dependent
  // round trips overlap phases A-B instead of opening phase D: its order word here, its key after the
  // age pass (oldest_victims' hook) or after phase B, and the key's token's two cuckoo buckets after
  // phase B (phase E's first CAS expectations, which the CAS checks). Nothing writes the order word's
  // position bits or the key during the commit (phase A only sets flag bits above them). Its scratch
  // row is not fetched early: that load is independent of the others in phase D anyway, and keeping
  // it live made the no-PDL record-plan build spill 164 bytes instead of 40 (ptxas -v, sm_90).
  const bool has_first = tid < misses;
  int32_t first_order = 0;
  uint64_t first_key = 0;
  BucketGuess first_guess{-1, -1};
  if (has_first) first_order = load_volatile32(order + tid);
  const auto load_first_key = [&] {
    if (has_first) first_key = load_volatile(keys + (static_cast<uint32_t>(first_order) & kOrderPosMask & p.miss_mask));
  };

  if (tid == 0) {
    s_ordinal = 0;
    s_needy_count = 0;
    s_insert_failed = 0;
    s_rebuild_failed = 0;
    s_direct_count = 0;
  }
  __syncthreads();

  // ---- A: approximate admission of the last step (APPROX_ADMISSION_STEPS = 1) -------------------
  if (!union_mode) {
    if (!overflow) {
      for (int32_t s = tid; s < hot; s += kCommitThreads) ref[s] = 0;
    }
    __syncthreads();
    const int step = p.steps - 1;
    const int64_t seq_len = load_index(p.seq_lens, (p.index_i64 >> 1) & 1u, static_cast<int64_t>(b) * p.steps + step);
    for (int k = tid; k < p.top_k; k += kCommitThreads) {
      const int32_t token = tokens[step * p.top_k + k];
      if (token < 0 || token >= seq_len) continue;
      // Same classification as the gather (the slot table is unchanged until phase D).
      if (token >= seq_len - p.page_size && tail_lookup(hv, token) >= 0) continue;
      const int32_t slot = hot_find(hv, token).slot;
      if (slot >= 0) {
        ref[slot] = epoch;
        continue;
      }
      const int32_t pos = miss_find(keys, p.miss_mask, epoch, token);
      if (pos < 0) continue;  // host row missing: not a miss
      const uint64_t v = load_volatile(vals + pos);
      const int32_t u = static_cast<int32_t>(static_cast<uint32_t>(v));
      if (!has_epoch(v, epoch) || u < 0 || u >= cap) continue;
      if ((atomicOr(order + u, kOrderClaim) & kOrderClaim) == 0) {
        if (atomicAdd(&s_ordinal, 1) < budget) atomicOr(order + u, kOrderAdmit);
      }
    }
  }
  __syncthreads();

  // ---- B: primary victims ---------------------------------------------------------------------
  // Union mode: every miss needs a victim (rotate or, in overflow, direct): CTA-wide up to
  // kOldestLineHot, per miss (its CLOCK partition) above.
  const bool oldest = union_mode && hot <= kOldestLineHot;
  if (oldest) oldest_victims(ref, epoch, cursor, hot, misses, first_ages, s_age, s_victim, s_hist, s_scan, s_cut, load_first_key);
  if (!oldest) load_first_key();
  for (int32_t c = tid; c < misses && !oldest; c += kCommitThreads) {
    const int32_t mo = load_volatile32(order + c);
    const bool direct = overflow && c >= cap;
    const bool rotate = c < cap && (union_mode || (mo & kOrderAdmit) != 0);
    int16_t v = kNoVictim;
    if (rotate || direct) {
      const int32_t got = union_mode ? union_victim(ref, epoch, cursor, hot, misses, c)
                                     : approx_victim(ref, epoch, hot, direct ? misses - cap : misses, direct ? c - cap : c);
      if (got >= 0) {
        v = static_cast<int16_t>(got);
      } else {
        v = kNeedsFallback;
        s_needy[atomicAdd(&s_needy_count, 1u)] = static_cast<uint16_t>(c);
      }
    }
    s_victim[c] = v;
  }
  if (has_first && !degraded_in) first_guess = cuckoo_guess(bank0, bank1, p.hash_mask, static_cast<int32_t>(static_cast<uint32_t>(first_key)));
  __syncthreads();

  // ---- C: CTA-wide fallback -------------------------------------------------------------------
  const uint32_t needy = s_needy_count;
  if (needy > 0) {
    fallback_victims(ref, epoch, cursor, hot, needy, s_needy, s_victim, s_scan);
    __syncthreads();
  }

  // ---- D: apply (rotation / direct), erase, miss_vals = row, plan of u >= C ---------------------
  // Direct misses are listed in s_needy (free after phase C) and copied in phase D2.
  bool first_applied = false;  // phase D set slot_tokens[s_victim[tid]] to first_key's token
  // miss_vals = row only for phase G, which runs on overflow or a pending output: each store here costs
  // the warp ~one round trip (results/probes/b1-found-h200-20261203/, call 3).
  const bool rows_read = overflow || (flags & kFlagPending) != 0;
  for (int32_t c = tid; c < misses; c += kCommitThreads) {
    const bool first = c == tid;
    int64_t src = -1;
    // (& miss_mask: a position outside this table is impossible, but must not become an address)
    const uint32_t pos = static_cast<uint32_t>(first ? first_order : load_volatile32(order + c)) & kOrderPosMask & p.miss_mask;
    const uint64_t key = first ? first_key : load_volatile(keys + pos);
    const int32_t token = static_cast<int32_t>(static_cast<uint32_t>(key));
    int32_t v = s_victim[c];
    if (!has_epoch(key, epoch)) v = kNoVictim;  // impossible: the gather wrote both
    // Every word this miss reads, issued together, volatile so that the compiler cannot sink the slot
    // table's two loads into the branches below (it did: scratch row, slot row, slot token and the
    // erase were four round trips in a row; now the loads are one and the erase waits for nothing).
    // The scratch row: the gather copied the data there; read before any rotation of c.
    const int32_t scratch_row = c < cap ? load_volatile32(scratch + c) : -1;
    const int32_t old_loc = v >= 0 ? load_volatile32(slot_locs + v) : -1;
    const int32_t old_tok = v >= 0 ? load_volatile32(slot_tokens + v) : -1;
    if (c >= cap) src = token < p.max_len ? p.host_cache_locs[rid * p.max_len + token] : -1;
    uint32_t row = kRowUnresolved;
    if (c < cap && valid_row(scratch_row, p.device_rows)) row = static_cast<uint32_t>(scratch_row);
    if (v >= 0) {
      const bool rotate = c < cap;
      const int32_t new_loc = rotate ? scratch_row : old_loc;
      if (valid_row(old_loc, p.device_rows) && valid_row(new_loc, p.device_rows) &&
          (rotate || valid_row(src, p.host_rows))) {
        slot_tokens[v] = token;
        if (first) first_applied = true;
        if (rotate) {
          slot_locs[v] = new_loc;
          scratch[c] = old_loc;
        } else {
          row = static_cast<uint32_t>(old_loc);
          s_needy[atomicAdd(&s_direct_count, 1u)] = static_cast<uint16_t>(c);
        }
        if (!degraded_in && old_tok >= 0) cuckoo_erase(bank0, bank1, p.hash_mask, old_tok, v);
      } else {
        s_victim[c] = kNoVictim;  // claimed (ref stays epoch, as the reference) but not applied
      }
    }
    if (rows_read) vals[pos] = static_cast<int64_t>(epoch_tag(epoch, row));
    if (kRecordPlan && c >= cap) {
      p.miss_src[static_cast<int64_t>(b) * p.plan_stride_src + c] = src;
      p.miss_dst[static_cast<int64_t>(b) * p.plan_stride_dst + c] = static_cast<int32_t>(row);  // -1 if none
    }
  }
  __syncthreads();

  // ---- E: cuckoo inserts (all erases are done) -------------------------------------------------
  if (!degraded_in) {
    for (int32_t c = tid; c < misses; c += kCommitThreads) {
      const int32_t v = s_victim[c];
      if (v < 0) continue;
      const bool first = c == tid && first_applied;  // token and buckets already in registers
      const int32_t token = first ? static_cast<int32_t>(static_cast<uint32_t>(first_key)) : slot_tokens[v];
      const BucketGuess g = first ? first_guess : cuckoo_guess(bank0, bank1, p.hash_mask, token);
      if (token != v && !cuckoo_insert(bank0, bank1, p.hash_mask, token, v, g)) s_insert_failed = 1;
    }
  }
  __syncthreads();

  // ---- F: rebuild a degraded index from the slot table ----------------------------------------
  const bool rebuild = degraded_in || s_insert_failed != 0;
  if (rebuild) {
    for (int64_t i = tid; i < 2 * h; i += kCommitThreads) bank0[i] = -1;
    __syncthreads();
    for (int32_t s = tid; s < hot; s += kCommitThreads) {
      const int32_t token = slot_tokens[s];
      if (token >= 0 && token != s && !cuckoo_insert(bank0, bank1, p.hash_mask, token, s, cuckoo_guess(bank0, bank1, p.hash_mask, token)))
        s_rebuild_failed = 1;
    }
    __syncthreads();
  }
  const bool degraded_out = rebuild && s_rebuild_failed != 0;

  // ---- G: outputs the gather left pending ------------------------------------------------------
  if (overflow || (flags & kFlagPending) != 0) {
    for (int32_t occ = tid; occ < p.occurrences; occ += kCommitThreads) {
      if (out[occ] != kOutPending) continue;
      const int32_t pos = miss_find(keys, p.miss_mask, epoch, tokens[occ]);
      int32_t loc = kOutUnresolved;
      if (pos >= 0) {
        const uint64_t v = load_volatile(vals + pos);
        const uint32_t r = static_cast<uint32_t>(v);
        if (has_epoch(v, epoch) && r != kRowUnresolved) loc = static_cast<int32_t>(r);
      }
      out[occ] = loc;
    }
  }

  // ---- D2: direct copies host -> victim's own row, kCommitThreads rows per round, all in flight --
  // Last, after the cheap metadata phases. A phase of its own: inside phase D's loop the copy's
  // registers made the 1024-thread kernel spill.
  const uint32_t direct_count = s_direct_count;
  for (uint32_t first = 0; first < direct_count; first += kCommitThreads) {
    const uint32_t n = min(direct_count - first, static_cast<uint32_t>(kCommitThreads));
    if (static_cast<uint32_t>(tid) < n) {
      const int32_t v = s_victim[s_needy[first + tid]];
      const int32_t token = slot_tokens[v];  // written in phase D; the row is the slot's own
      s_copy_src[tid] = p.host_cache_locs[rid * p.max_len + token];
      s_copy_dst[tid] = slot_locs[v];
    }
    __syncthreads();
    block_copy_rows<kCommitThreads, kCommitInFlight, /*kScaleNarrow=*/false>(p.host_cache, p.device_buffer,
                                                                             p.item_size_bytes, s_copy_src, s_copy_dst, n);
    __syncthreads();
  }

  // ---- finalize -------------------------------------------------------------------------------
  if (tid == 0) {
    counters[kCounterLastMisses] = misses;
    counters[kCounterWork] = 0;
    counters[kCounterUnionHits] = 0;
    counters[kCounterFlags] = (flags & ~(kFlagDegraded | kFlagPending | kFlagLookupsMask)) | (degraded_out ? kFlagDegraded : 0);
    p.clock[rid * 2] = epoch;
    p.clock[rid * 2 + 1] = misses > 0 ? (cursor + min(misses, hot)) % hot : cursor;
    if (kRecordPlan) p.miss_count[b] = misses;
  }
  // The gather's copies may still be in flight: the swap completes with them (anything after us in
  // the stream sees every row, whether or not it waits on this grid alone).
  pdl_wait_primary<kPdl>();
}

}  // namespace hisparse::spec
