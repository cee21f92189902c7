// Hot-buffer lookup and the two-bank cuckoo index of the multi-step state (docs/semantics.md §3.5).
// Same hashes and entry format as hisparse/state.py and hisparse/reference/cuckoo.py.
//
// Concurrency contract (why no entry is ever silently lost, unlike the upstream risk in §7.5):
//   - lookups run only in the gather (no writer in that kernel), and in the commit before any write;
//   - the commit erases in one phase and inserts in the next (a __syncthreads between them), and
//     one CTA owns a request. Erases never race with kicks, so an erase always finds its entry, and
//     the table stays exact (no stale entries) outside degraded mode;
//   - concurrent inserts move entries only with atomicExch: every displaced entry is carried by
//     exactly one thread until it lands in an empty bucket. An entry is dropped only when a chain
//     exceeds kMaxKicks, and that is reported (the caller sets the degraded flag and rebuilds).
// Lookups validate an entry against device_buffer_tokens anyway, so even a stale entry cannot
// return a wrong slot.
#pragma once

#include <cstdint>

#include "hisparse/spec_common.cuh"

namespace hisparse::spec {

constexpr int64_t kHashErased = -2;

__device__ __forceinline__ uint32_t cuckoo_h1(int32_t token) { return static_cast<uint32_t>(token) * kHashMult; }

// murmur3 finalizer (state.secondary_hash)
__device__ __forceinline__ uint32_t cuckoo_h2(int32_t token) {
  uint32_t x = static_cast<uint32_t>(token);
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

__device__ __forceinline__ int64_t cuckoo_pack(int32_t token, int32_t slot) {
  return static_cast<int64_t>((static_cast<uint64_t>(static_cast<uint32_t>(slot)) << 32) | static_cast<uint32_t>(token));
}
__device__ __forceinline__ int32_t entry_token(int64_t e) { return static_cast<int32_t>(static_cast<uint32_t>(e)); }

// Slot an entry names if it is live, for `token`, and in range; else -1. The caller still checks
// that the slot holds the token.
__device__ __forceinline__ int32_t entry_slot_for(int64_t e, int32_t token, int32_t hot) {
  if (e < 0 || entry_token(e) != token) return -1;
  const int64_t slot = e >> 32;
  return slot < hot ? static_cast<int32_t>(slot) : -1;
}

// A hot slot and the device row it holds.
struct HotHit {
  int32_t slot;  // -1: the token is not resident
  int32_t loc;   // device_buffer_locs[slot] (-1 with slot -1)
};

// Hot slot holding `token` and its row. Order as §3.5 and reference hot_lookup: identity fast path
// (token t in slot t needs no entry), bank 0, bank 1, then in degraded mode the lowest slot holding
// the token. The three first loads are independent and issued together. Each candidate slot's row is
// loaded with the token check that confirms the slot (the identity slot's with the identity test, a
// bank entry's with its slot's token), not after it: a hit is one round trip shorter, for a wasted
// 4-byte L2 read per candidate that is not the token's. The commit's union pass needs only the slot and
// leaves the row unused (plain loads whose result is unused, which the compiler may drop).
__device__ __forceinline__ HotHit hot_find(const HotView& v, int32_t token) {
  const bool ident_possible = token < v.hot;
  const int32_t ident = ident_possible ? v.tokens[token] : -1;
  const int32_t ident_loc = ident_possible ? v.locs[token] : -1;
  const int64_t e0 = v.bank0[cuckoo_h1(token) & v.hash_mask];
  const int64_t e1 = v.bank1[cuckoo_h2(token) & v.hash_mask];
  if (ident_possible && ident == token) return {token, ident_loc};
  const int32_t s0 = entry_slot_for(e0, token, v.hot);
  const int32_t s1 = entry_slot_for(e1, token, v.hot);
  const int32_t held0 = s0 >= 0 ? v.tokens[s0] : -1;
  const int32_t loc0 = s0 >= 0 ? v.locs[s0] : -1;
  const int32_t held1 = s1 >= 0 ? v.tokens[s1] : -1;
  const int32_t loc1 = s1 >= 0 ? v.locs[s1] : -1;
  if (s0 >= 0 && held0 == token) return {s0, loc0};
  if (s1 >= 0 && held1 == token) return {s1, loc1};
  if (v.degraded) {
    // Only after a failed insert and until the commit's rebuild succeeds; slow but correct.
    for (int32_t s = 0; s < v.hot; ++s) {
      if (v.tokens[s] == token) return {s, v.locs[s]};
    }
  }
  return {-1, -1};
}

// Extra-page (tail) row of `token`, or -1: the first tail slot holding it with a row >= 0 (§3.6.3).
__device__ __forceinline__ int32_t tail_lookup(const HotView& v, int32_t token) {
  for (int32_t j = 0; j < v.page_size; ++j) {
    if (v.tokens[v.hot + j] == token) {
      const int32_t loc = v.locs[v.hot + j];
      if (loc >= 0) return loc;
    }
  }
  return -1;
}

// Marks the exact entry (token, slot) erased in the bank that holds it; a no-op when absent. An exact
// entry is in at most one bank (an insert or a kick moves an entry, it never copies one), so one CAS per
// bank, both issued at once and neither result read: the caller waits for neither. The commit's
// __syncthreads before its inserts orders them before every insert of the CTA (one CTA owns the table).
// Before: bank 0's CAS, then bank 1's only when bank 0 did not hold it, two round trips in the
// commit's critical path.
__device__ __forceinline__ void cuckoo_erase(int64_t* bank0, int64_t* bank1, uint32_t mask, int32_t token, int32_t slot) {
  const unsigned long long want = static_cast<unsigned long long>(cuckoo_pack(token, slot));
  const unsigned long long erased = static_cast<unsigned long long>(kHashErased);
  atomicCAS(as_ull(bank0 + (cuckoo_h1(token) & mask)), want, erased);
  atomicCAS(as_ull(bank1 + (cuckoo_h2(token) & mask)), want, erased);
}

// Claims `p` for `entry` if it is empty or holds the same token (the reference's first stage).
// Returns 1 on success, 0 if the bucket holds another token, after bounded CAS retries.
// `guess` is a value of the bucket read earlier (possibly stale): an empty or same-token guess is only
// the first CAS's expectation, which the CAS checks; a guess of another token is read again, so the
// "another token" answer always rests on a current value, as without a guess.
__device__ __forceinline__ bool cuckoo_try_bucket(int64_t* p, int64_t entry, int32_t token, int64_t guess) {
  int64_t old = guess >= 0 && entry_token(guess) != token ? static_cast<int64_t>(load_volatile(p)) : guess;
  for (int attempt = 0; attempt < kCasRetries; ++attempt) {
    if (old >= 0 && entry_token(old) != token) return false;
    const int64_t seen = static_cast<int64_t>(
        atomicCAS(as_ull(p), static_cast<unsigned long long>(old), static_cast<unsigned long long>(entry)));
    if (seen == old) return true;
    old = seen;
  }
  return false;  // heavy contention on one bucket: fall through to the (always safe) kick chain
}

// The token's two buckets, read together (the first CAS expectations of cuckoo_insert).
struct BucketGuess {
  int64_t b0, b1;
};
__device__ __forceinline__ BucketGuess cuckoo_guess(const int64_t* bank0, const int64_t* bank1, uint32_t mask, int32_t token) {
  return {static_cast<int64_t>(load_volatile(bank0 + (cuckoo_h1(token) & mask))),
          static_cast<int64_t>(load_volatile(bank1 + (cuckoo_h2(token) & mask)))};
}

// Inserts (token -> slot), bank 0 first, then bank 1, then a kick chain. Safe with concurrent inserts
// (not with concurrent erases or lookups). `g` holds earlier reads of the two buckets (cuckoo_guess,
// issued together so that a full bank 0 costs no extra round trip). Returns false when an entry had
// to be dropped after kMaxKicks (caller degrades and rebuilds).
__device__ __forceinline__ bool cuckoo_insert(int64_t* bank0, int64_t* bank1, uint32_t mask, int32_t token, int32_t slot,
                                              BucketGuess g) {
  const int64_t entry = cuckoo_pack(token, slot);
  if (cuckoo_try_bucket(bank0 + (cuckoo_h1(token) & mask), entry, token, g.b0)) return true;
  if (cuckoo_try_bucket(bank1 + (cuckoo_h2(token) & mask), entry, token, g.b1)) return true;
  int64_t carried = entry;
  int bank = 0;
  for (int kick = 0; kick < kMaxKicks; ++kick) {
    const int32_t t = entry_token(carried);
    int64_t* p = bank == 0 ? bank0 + (cuckoo_h1(t) & mask) : bank1 + (cuckoo_h2(t) & mask);
    const int64_t displaced = static_cast<int64_t>(atomicExch(as_ull(p), static_cast<unsigned long long>(carried)));
    if (displaced < 0) return true;
    carried = displaced;
    bank ^= 1;
  }
  return false;
}

}  // namespace hisparse::spec
