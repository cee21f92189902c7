// Multi-step swap, kernel 1 of 2: the gather (docs/semantics.md §3.6 with our state layout).
//
// Grid: batch * gather_tiles CTAs of kGatherThreads; the host picks gather_tiles from the device (one
// wave of resident CTAs, csrc/swap_multi.cuh launch_gather). A CTA works in rounds of one occurrence
// per thread: round r of thread `tid` in tile `y` is occurrence y + tiles * (tid + kGatherThreads * r),
// so consecutive top-k entries land in different CTAs and a run of misses (the indexer's fresh tokens
// often sit together) is spread over all the request's CTAs. On the H200 a request of 4 x 2048
// occurrences has 32 CTAs of one round each (request-major waves: the CTAs resident at once serve a few
// consecutive requests); at batch 1, 128 CTAs of one round of 64 occurrences; on a pool near the L2's
// size, one wave of CTAs at 4 per SM with rounds (swap_multi.cuh).
//
// Per occurrence (step s = occ / K, token t, seq_len = seq_lens[b*S + s]), only 0 <= t < seq_len:
//   1. tail: t >= seq_len - page_size and an extra-page slot holds t with a row >= 0 -> that row;
//   2. hot: hot_find (identity, cuckoo, linear scan if degraded) -> device_buffer_locs[slot];
//      the slot's ref is exchanged to the epoch; a changed ref counts one distinct union hit;
//   3. miss with a host row in [0, host_rows): dedup across steps in the epoch-tagged miss table.
//      The claimer of a token takes u = work counter++, records miss_order[u] = table position,
//      publishes (epoch << 32) | u in miss_vals, and for u < C owns the copy host -> scratch_locs[u].
//      Others wait for the publication a bounded time, else leave -2 for the commit (kOutPending).
//      u >= C (overflow) also leaves -2: the commit picks the row.
//   Anything else stays -1 (invalid token, host row missing).
// After each round's lookups the CTA copies the rows it claimed in that round together
// (block_copy_rows: all of them in flight at once); at small batches the last round's copies first
// wait for the other CTAs of the request to finish their lookups (wait_request_lookups).
// After its last round's lookups (before that round's copy) the CTA counts itself in its request's
// flags, bits 8-15: the commit (launched at the gather's start) proceeds on that count.
//
// Padding rows (b >= num_real_reqs[0]) get -1 everywhere and miss_count 0; their state is untouched.
#pragma once

#include <cstdint>

#include "hisparse/copy_rows.cuh"
#include "hisparse/cuckoo.cuh"
#include "hisparse/pdl.cuh"
#include "hisparse/spec_common.cuh"

namespace hisparse::spec {

constexpr int kGatherThreads = 256;
// 16-byte loads in flight per thread in the gather's copy. A round claims ~24 rows of 576 B (782
// misses of 8192 occurrences, 256 per round) and moves them in one pass: 24 * 36 words <= 256 * 4.
constexpr int kGatherInFlight = 4;

enum class MissKind : int { kNone, kClaimed, kFound, kPending };

struct MissResult {
  MissKind kind;
  int32_t u;
};

// u = (*counter)++ with one atomic per group of lanes that arrive together (warp-aggregated: the
// lanes active at this point share one atomicAdd; __shfl_sync over exactly those lanes).
__device__ __forceinline__ int32_t aggregated_increment(int32_t* counter) {
  const unsigned active = __activemask();
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int leader = __ffs(active) - 1;
  const int rank = __popc(active & ((1u << lane) - 1u));
  int32_t base = 0;
  if (lane == leader) base = atomicAdd(counter, __popc(active));
  base = __shfl_sync(active, base, leader);
  return base + rank;
}

// Finds or claims `token` in the request's miss table (linear probing from miss_hash). The table
// holds at most T live keys in M >= 2T positions, and keys are only added during a call, so the probe
// ends within M positions. `first_key` is the key at the token's home position, loaded earlier (with
// the hot lookup): it is only the first CAS's expectation or a word of this epoch, which never changes
// during the call, so a stale value costs a failed CAS, never a wrong decision. When first_key is of an
// older epoch the caller has already issued the first CAS (expecting first_key) and passes what it
// returned as `first_seen`.
__device__ __forceinline__ MissResult miss_claim(const SwapMultiParams& p, int64_t* keys, int64_t* vals, int32_t* order,
                                                 int32_t* work_counter, int32_t epoch, int32_t token, uint64_t first_key,
                                                 uint64_t first_seen) {
  const uint64_t want = epoch_tag(epoch, static_cast<uint32_t>(token));
  uint32_t pos = miss_hash(token) & p.miss_mask;
  for (uint32_t probes = 0; probes <= p.miss_mask; ++probes) {
    uint64_t cur = probes == 0 ? first_key : load_volatile(keys + pos);
    if (!has_epoch(cur, epoch)) {  // free in this call (an older epoch, or never used)
      const uint64_t seen = probes == 0 ? first_seen : atomicCAS(as_ull(keys + pos), cur, want);
      if (seen == cur) {
        const int32_t u = aggregated_increment(work_counter);
        if (u >= p.occurrences) return {MissKind::kNone, -1};  // impossible: <= T distinct tokens
        order[u] = static_cast<int32_t>(pos);  // flags 0; read by the commit after the grid barrier
        atomicExch(as_ull(vals + pos), epoch_tag(epoch, static_cast<uint32_t>(u)));
        return {MissKind::kClaimed, u};
      }
      cur = seen;  // another lane claimed this position in this epoch; look at what it wrote
      // (An older epoch here is impossible: nobody writes one during a call. Retry the same
      // position; the loop bound still holds.)
      if (!has_epoch(cur, epoch)) continue;
    }
    if (static_cast<int32_t>(static_cast<uint32_t>(cur)) == token) {
      for (int spin = 0; spin < kSpinLimit; ++spin) {
        const uint64_t v = load_volatile(vals + pos);
        if (has_epoch(v, epoch)) return {MissKind::kFound, static_cast<int32_t>(static_cast<uint32_t>(v))};
        __nanosleep(kSpinSleepNs);
      }
      return {MissKind::kPending, -1};
    }
    pos = (pos + 1) & p.miss_mask;
  }
  return {MissKind::kNone, -1};
}

// An occurrence's inputs: its token and its step's seq_len. Independent of the request's state, so the
// kernel loads round 0's before that state (one round trip fewer before the lookups).
struct Occurrence {
  int32_t token;
  int64_t seq_len;
};
__device__ __forceinline__ Occurrence load_occurrence(const SwapMultiParams& p, int b, int occ) {
  if (occ >= p.occurrences) return {-1, 0};
  const int step = occ / p.top_k;
  return {p.top_k_tokens[static_cast<int64_t>(b) * p.top_k_stride + occ],
          load_index(p.seq_lens, (p.index_i64 >> 1) & 1u, static_cast<int64_t>(b) * p.steps + step)};
}

// Steps 1-3 above for one occurrence; a claimed miss with a scratch row joins the CTA's copy list.
template <bool kRecordPlan>
__device__ __forceinline__ void gather_one(const SwapMultiParams& p, const HotView& hv, int64_t rid, int b, int occ,
                                           Occurrence in, int32_t epoch, int32_t* counters, int32_t* out, int64_t* s_src,
                                           int32_t* s_dst, uint32_t* s_rows, int32_t* s_hits, int32_t* s_pending) {
  const int32_t token = in.token;
  const int64_t seq_len = in.seq_len;
  int32_t loc = kOutUnresolved;
  if (token >= 0 && token < seq_len) {
    const int32_t tail = token >= seq_len - p.page_size ? tail_lookup(hv, token) : -1;
    // A miss's host row and its home word of the miss table, issued with the hot lookup's loads
    // (volatile, so that the compiler cannot sink them into the miss branch): two round trips fewer
    // on a miss's path, for two wasted 8-byte loads on a hit's.
    const int64_t m = static_cast<int64_t>(p.miss_mask) + 1;
    int64_t* keys = p.miss_keys + rid * m;
    const int64_t src = token < p.max_len ? static_cast<int64_t>(load_volatile(p.host_cache_locs + rid * p.max_len + token)) : -1;
    const uint64_t home_key = load_volatile(keys + (miss_hash(token) & p.miss_mask));
    if (tail >= 0) {
      loc = tail;
    } else {
      const HotHit hit = hot_find(hv, token);
      const bool is_miss = hit.slot < 0 && valid_row(src, p.host_rows);
      // A hit's ref exchange and a miss's first claim CAS are issued before either result is used, so
      // a warp with lanes of both kinds waits for both at once, not for the hit branch's atomic before
      // the miss branch issues its CAS. Measured: both paths of a b1 call 0.2 us shorter (docs/perf-notes.md,
      // 2026-12-02, e5be9c0; results/probes/b1-lookups-h200-20261202/).
      int32_t seen_ref = epoch;
      if (hit.slot >= 0) seen_ref = atomicExch(p.ref_epochs + rid * p.hot + hit.slot, epoch);
      const uint64_t want = epoch_tag(epoch, static_cast<uint32_t>(token));
      const bool first_cas = is_miss && !has_epoch(home_key, epoch);
      uint64_t first_seen = 0;
      if (first_cas) first_seen = atomicCAS(as_ull(keys + (miss_hash(token) & p.miss_mask)), home_key, want);
      if (hit.slot >= 0) {
        loc = hit.loc;
        // Distinct hit slots: the first exchange of a slot in this epoch sees an older value.
        if (seen_ref != epoch) atomicAdd(s_hits, 1);
      } else {
        if (is_miss) {
          const MissResult r = miss_claim(p, keys, p.miss_vals + rid * m, p.miss_order + rid * p.occurrences,
                                          counters + kCounterWork, epoch, token, home_key, first_seen);
          if (r.kind == MissKind::kPending) {
            loc = kOutPending;
            *s_pending = 1;
          } else if (r.kind != MissKind::kNone) {
            if (r.u < p.capacity) {
              const int32_t row = p.scratch_locs[rid * p.capacity + r.u];
              const bool ok = valid_row(row, p.device_rows);
              loc = ok ? row : kOutUnresolved;
              if (r.kind == MissKind::kClaimed) {
                if (ok) {
                  const uint32_t k = atomicAdd(s_rows, 1u);
                  s_src[k] = src;
                  s_dst[k] = row;
                }
                if (kRecordPlan) {
                  p.miss_src[static_cast<int64_t>(b) * p.plan_stride_src + r.u] = src;
                  p.miss_dst[static_cast<int64_t>(b) * p.plan_stride_dst + r.u] = ok ? row : -1;
                }
              }
            } else {
              loc = kOutPending;  // overflow: the commit copies it into a victim's row
            }
          }
        }
      }
    }
  }
  out[occ] = loc;
}

// With copy_after_lookups (launch_gather: small batches with PDL, where every gather CTA and each
// request's commit has an SM of its own, so the request's CTAs all run at once): a CTA past its lookups
// holds its copies until every CTA of its request has counted itself too. Otherwise the first CTAs' copies of
// cold host pages run while the last CTAs still look up device state, and those lookups end late: at
// batch 1 in the decode regime the last CTA's lookups ended at 12.2 us against a median of 6.3 (5.3
// and 5.1 warm), and the commit waits for the last one (results/probes/b1-timeline-h100-20261206/).
// Bounded like the commit's poll; it also ends once the commit has finished the call (clock = epoch),
// which happens only after every count. Nothing is read from the other CTAs: the wait is timing only.
__device__ __forceinline__ void wait_request_lookups(const SwapMultiParams& p, const int32_t* counters, int64_t rid,
                                                     int32_t epoch) {
  if (threadIdx.x == 0) {
    for (int spin = 0; spin < kLookupSpinLimit; ++spin) {
      if (lookups_counted(p, counters) || load_volatile32(p.clock + rid * 2) == epoch) break;
      __nanosleep(kSpinSleepNs);
    }
  }
  __syncthreads();
}

// kMinBlocks: CTAs per SM the registers must allow (__launch_bounds__). 2 caps them at 128, what the
// compiler took without a minimum (an explicit 1 let it take 152: one CTA per SM); 4 caps them at 64
// (the small-pool shape, swap_multi.cuh; 144 B spilled).
template <bool kPdl, bool kRecordPlan, int kMinBlocks = 2, int kThreads = kGatherThreads>
__global__ void __launch_bounds__(kThreads, kMinBlocks) spec_gather_kernel(const __grid_constant__ SwapMultiParams p) {
  __shared__ int64_t s_src[kThreads];  // copy list of this CTA's round: host row -> scratch row
  __shared__ int32_t s_dst[kThreads];
  __shared__ uint32_t s_rows;
  __shared__ int32_t s_hits;
  __shared__ int32_t s_pending;

  // The commit may launch at once (PDL): it waits for its request's lookup counts, not for our copies,
  // which it never reads (rows land in scratch rows it only renames), and meanwhile takes the address
  // translations of its request's state while only our lookups read device memory. Triggered after the
  // lookups instead, its first loads queued behind the translations of our copies' host pages: in the
  // decode regime batch 1's commit waited 9.5 us from the last lookup to its first phase, 2.4 warm
  // (results/probes/b1-timeline-h200-20261205/).
  if (threadIdx.x == 0) pdl_launch_dependents<kPdl>();
  const int tiles = p.gather_tiles;
  const int b = static_cast<int>(blockIdx.x) / tiles;
  const int tile = static_cast<int>(blockIdx.x) - b * tiles;
  const int tid = static_cast<int>(threadIdx.x);
  // Round r: occurrence tile + tiles * (tid + kThreads * r). Uniform over the CTA (the host keeps
  // tiles <= occurrences, so every CTA has at least one round).
  const int per_round = tiles * kThreads;
  const int rounds = (p.occurrences - tile + per_round - 1) / per_round;
  int32_t* out = p.out + static_cast<int64_t>(b) * p.out_stride;

  Occurrence next = load_occurrence(p, b, tile + tiles * tid);  // round 0's, before the state
  const int64_t rid = request_slot(p, b);
  if (rid < 0) {  // padding row (or an out-of-range slot): defined outputs, no state touched
    for (int occ = tile + tiles * tid; occ < p.occurrences; occ += per_round) out[occ] = kOutUnresolved;
    if (kRecordPlan && tile == 0 && tid == 0) p.miss_count[b] = 0;
    return;
  }
  if (tid == 0) {
    s_hits = 0;
    s_pending = 0;
  }

  const int32_t epoch = next_epoch(p.clock[rid * 2]);
  int32_t* counters = p.counters + rid * 4;
  const bool degraded = (counters[kCounterFlags] & kFlagDegraded) != 0;
  const HotView hv = hot_view(p, rid, degraded);

  for (int r = 0; r < rounds; ++r) {
    if (tid == 0) s_rows = 0;
    __syncthreads();  // s_rows reset (and, for r > 0, the previous round's copy done with s_src)
    const int occ = tile + tiles * (tid + kThreads * r);
    const Occurrence in = next;
    if (r + 1 < rounds) next = load_occurrence(p, b, occ + per_round);  // in flight across this round
    if (occ < p.occurrences) gather_one<kRecordPlan>(p, hv, rid, b, occ, in, epoch, counters, out, s_src, s_dst, &s_rows, &s_hits, &s_pending);
    __syncthreads();
    if (r == rounds - 1) {
      if (tid == 0) {
        if (s_hits != 0) atomicAdd(counters + kCounterUnionHits, s_hits);
        if (s_pending != 0) atomicOr(counters + kCounterFlags, kFlagPending);
        // Every write of this CTA's lookups (outputs, miss table, order, plan) before the count: the
        // barrier above orders the CTA's threads, the fence makes them visible device-wide (the
        // pattern of cooperative groups' grid sync). The commit starts on the count.
        __threadfence();
        atomicAdd(counters + kCounterFlags, kFlagLookupsOne);
      }
      if (p.copy_after_lookups) wait_request_lookups(p, counters, rid, epoch);
    }
    block_copy_rows<kThreads, kGatherInFlight>(p.host_cache, p.device_buffer, p.item_size_bytes, s_src, s_dst, s_rows);
    if (r + 1 < rounds) __syncthreads();
  }
}

}  // namespace hisparse::spec
