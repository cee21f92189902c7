// Host entry of the multi-step (speculative) swap: gather + commit on the caller's stream.
//
// Parameter order: the swap_multi table in hisparse/kernels/signature.py (the state's eight tensors in
// place of `state`; tests/kernels/test_op_args.py holds this list to it).
//
// The Python wrapper (hisparse/ops/swap_multi.py) validates everything with InputError first; the
// checks here guard the kernels' memory safety against direct callers (tensor metadata only: no
// device values are read, no host sync, nothing allocated, so a call can be captured in a CUDA graph).
// host_cache may be a pinned CPU tensor: the kernels read it through its UVA address (pinned-ness is
// checked by the wrapper; an unpinned host pointer would fault).
//
// Template arguments: kPdl (launch the commit with programmatic stream serialization so its launch
// overlaps the gather's tail; off is the path for pre-Hopper GPUs) and kRecordPlan (write the miss
// plan; the plan tensors are None otherwise). Every size is a runtime value.
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/optional.h>

#include <algorithm>
#include <cstdint>

#include "hisparse/spec_commit.cuh"
#include "hisparse/spec_gather.cuh"
#include "entry_checks.h"
#include "launch.h"

namespace hisparse {

namespace swap_multi_detail {

using host::TensorView;

// Limits: hisparse/kernels/limits.py holds the same values (tests/kernels/test_limits.py).
constexpr int64_t kMaxOccurrences = 8192;
constexpr int64_t kMaxSteps = 4;
constexpr int64_t kMaxHot = 32768;
constexpr int64_t kMaxMissTable = 16384;  // 14-bit positions in miss_order
// Bounds (row, 16-byte word) flattening to 32 bits in copy_rows.cuh: 8192 rows * 2^16 words.
constexpr int64_t kMaxItemBytes = int64_t{1} << 20;

inline bool is_pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

inline bool is_cuda(const TensorView& t) { return t.device().device_type == kDLCUDA; }

inline void check_same_device(const char* name, const TensorView& t, const DLDevice& dev) {
  TVM_FFI_ICHECK(t.device().device_type == dev.device_type && t.device().device_id == dev.device_id)
      << name << ": must be on the same CUDA device as top_k_tokens";
}

inline void check_contiguous(const char* name, const TensorView& t) {
  TVM_FFI_ICHECK(t.IsContiguous()) << name << ": must be contiguous";
}

}  // namespace swap_multi_detail

// The gather's launch shape, from the device at run time: CTAs of spec::kGatherThreads, two shapes.
// - Request-major waves (the default): one round of kGatherThreads occurrences per CTA, so a request
//   has ceil(occurrences / kGatherThreads) CTAs (32 at 4 x 2048) and the grid is batch x that. CTAs are
//   scheduled in blockIdx order, so the CTAs resident at one time serve a few consecutive requests
//   (~8 on the H200 at two per SM), not all of them. Why: in a decode step the GPU's translations of
//   host addresses are cold, and a scattered gather then pays per distinct 4 KiB host page at a rate
//   set by how close together in the pool the pages in flight are (scripts/probe_translation.py,
//   docs/perf-notes.md 2026-12-04: a bare gather of the same 54.6k rows, cold, 1224 us with every
//   request's rows in flight against 875 us with one window of consecutive requests in flight; warm,
//   634 against 596). Same-call A/B on the H200 (results/probes/translation-h200-20261204/), `serving`
//   decode regime: batch 64 1025.9 -> 745.0 us, batch 32 478.0 -> 356.6, batch 16 212.2 -> 190.9,
//   batch 8 unchanged (it already had 32 CTAs a request); in the warm regime batch 64 lost 10%
//   (631.8 -> 696.0), the cost of the regime a deployment does not run in. 8 CTAs a request (4 rounds
//   each, ~33 requests resident) lost in both regimes (1047.7 and 965.9 us at batch 64).
//   Small batch: one CTA per SM, down to kSpreadOccurrences occurrences each, where that is more CTAs
//   (b1 on the H200: 128 CTAs of 64 occurrences). A lookup round of 64 lanes per CTA ends sooner than
//   one of 256 (fewer claims and found-lane waits per SM). One SM per request stays free: its commit
//   CTA (kCommitThreads at the 64-register cap) needs a whole SM's registers, and under PDL it starts
//   while the gather runs only if it finds one. Same-call A/Bs on the H200
//   (results/probes/tiles-h200-20261203/): b1 at 128 tiles 0.915-0.935, its gather alone 15.6 against
//   17.8 us; b2 at 66 tiles (132 CTAs, no SM left for the commits) 1.105, at 64 tiles 0.978.
// - A host pool within 1.5x the device's L2 whose CTAs at the 128-register build's occupancy would
//   each run 2 rounds or more: the 64-register build at its occupancy (4 per SM on the H200), one wave
//   of CTAs with rounds. Its rows can be read again from L2 (on `upstream` every request reads the same
//   782 rows per call, and the swap runs under the PCIe time of the rows it writes), so the CTA's
//   lookup-then-copy rounds wait on L2, not on the link, and twice the CTAs per SM hide twice the
//   latency; such a pool has no translations to miss. The pool is only a proxy for that reuse; it is
//   what the host knows without reading device values. Same-call A/B on the H200
//   (results/probes/gather-groups-h200-20261201/, 2026-12-01), `upstream`: batch 32 276-278 us against
//   296-297, batch 64 438-450 against 511-526, batch 16 150 against 152; where the line sits, probes of
//   multiples 1, 2 and 8 of L2 (2026-12-01, e0c2812): `upstream` hot 32768 (1.04 / 1.18x L2) batch 64
//   441-447 us at 4 per SM against 524-526 at 2; short-context `serving` batch 16 (1.98x L2) lost 2.5-6%
//   at 4 per SM. 1.5x sits between the measured wins and losses.
// The tests are tensor shapes and device attributes: the host reads no device value.
template <bool kPdl, bool kRecordPlan, int kMinBlocks>
inline int gather_occupancy(int device) {
  // Queried once per device and instantiation (like host::device_attribute): the launch path stays cheap.
  static int per_sm_of[64] = {0};
  const int slot = device >= 0 && device < 64 ? device : 0;
  if (per_sm_of[slot] == 0) {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, spec::spec_gather_kernel<kPdl, kRecordPlan, kMinBlocks>,
                                                      spec::kGatherThreads, 0) != cudaSuccess ||
        per_sm < 1) {
      per_sm = 1;
    }
    per_sm_of[slot] = per_sm;
  }
  return per_sm_of[slot];
}

template <bool kPdl, bool kRecordPlan>
inline void launch_gather(spec::SwapMultiParams& p, int64_t bs, int64_t occurrences, int64_t pool_bytes, int device,
                          cudaStream_t stream) {
  constexpr int kThreads = spec::kGatherThreads;
  constexpr int64_t kSpreadOccurrences = 64;
  static_assert(swap_multi_detail::kMaxOccurrences / kSpreadOccurrences <= (spec::kFlagLookupsMask >> spec::kLookupsShift),
                "the commit counts gather CTAs in 8 bits of the flags");
  const int64_t sms = host::device_attribute<cudaDevAttrMultiProcessorCount>(device);
  const int64_t max_tiles = (occurrences + kThreads - 1) / kThreads;  // one round per CTA
  const auto tiles_at = [&](int per_sm) { return std::clamp<int64_t>(per_sm * sms / bs, 1, max_tiles); };
  const int64_t l2_bytes = host::device_attribute<cudaDevAttrL2CacheSize>(device);
  const bool small_pool_rounds = 2 * pool_bytes <= 3 * l2_bytes &&
                                 tiles_at(gather_occupancy<kPdl, kRecordPlan, 2>(device)) * kThreads < occurrences;
  int64_t tiles;
  if (small_pool_rounds) {
    tiles = tiles_at(gather_occupancy<kPdl, kRecordPlan, 4>(device));
  } else {
    const int64_t spread = std::min((sms - bs) / bs, (occurrences + kSpreadOccurrences - 1) / kSpreadOccurrences);
    tiles = std::max(max_tiles, spread);
  }
  p.gather_tiles = static_cast<int32_t>(tiles);
  // One gather CTA per SM and an SM for each commit (batch 1-4 on 132 SMs): the request's CTAs are all
  // resident together, so a CTA may wait for the others' lookup counts before it copies
  // (spec_gather.cuh, wait_request_lookups). Same-call A/Bs on H100 nodes whose bare gather runs at the
  // H200's rate (results/probes/copy-after-lookups-h100-20261206/), `serving` decode regime, PDL on:
  // batch 1 22.0 -> 20.1 us, batch 2 41.9 -> 38.3, batch 4 and 8 unchanged; warm batch 1 18.3 -> 19.7,
  // the cost of the regime a deployment does not run in; on a node whose host gathers 1.4x slower it
  // loses in both regimes (docs/known-issues.md). PDL only: without it the commit starts after the whole
  // gather, so a late lookup delays nothing the wait could save, and full runs on both kinds of node
  // measured decode batch 1 1.4-2.2 us slower with the wait (docs/perf-notes.md, 2026-12-06).
  p.copy_after_lookups = kPdl && !small_pool_rounds && bs * tiles <= sms - bs ? 1 : 0;
  const auto kernel = small_pool_rounds ? &spec::spec_gather_kernel<kPdl, kRecordPlan, 4>
                                        : &spec::spec_gather_kernel<kPdl, kRecordPlan, 2>;
  host::launch(kernel, dim3(static_cast<unsigned>(bs * tiles)), dim3(kThreads), 0, stream, false, p);
}

template <bool kPdl, bool kRecordPlan>
void swap_multi_entry(tvm::ffi::TensorView top_k_tokens, tvm::ffi::TensorView device_buffer_tokens, tvm::ffi::TensorView host_cache_locs,
                      tvm::ffi::TensorView device_buffer_locs, tvm::ffi::TensorView host_cache, tvm::ffi::TensorView device_buffer,
                      tvm::ffi::TensorView top_k_device_locs, tvm::ffi::TensorView req_pool_indices, tvm::ffi::TensorView seq_lens,
                      tvm::ffi::TensorView num_real_reqs, tvm::ffi::TensorView hash_index, tvm::ffi::TensorView ref_epochs, tvm::ffi::TensorView clock,
                      tvm::ffi::TensorView counters, tvm::ffi::TensorView scratch_locs, tvm::ffi::TensorView miss_keys, tvm::ffi::TensorView miss_vals,
                      tvm::ffi::TensorView miss_order, tvm::ffi::Optional<tvm::ffi::TensorView> miss_src,
                      tvm::ffi::Optional<tvm::ffi::TensorView> miss_dst, tvm::ffi::Optional<tvm::ffi::TensorView> miss_count,
                      int64_t item_size_bytes) {
  using namespace swap_multi_detail;
  using host::is_i32;
  using host::is_i64;
  using host::ptr;

  // ---- top-k, output -------------------------------------------------------------------------
  TVM_FFI_ICHECK(is_cuda(top_k_tokens)) << "top_k_tokens: must be a CUDA tensor";
  const DLDevice dev = top_k_tokens.device();
  TVM_FFI_ICHECK(is_i32(top_k_tokens) && top_k_tokens.ndim() == 3) << "top_k_tokens: must be int32 [bs, steps, top_k]";
  const int64_t bs = top_k_tokens.size(0), steps = top_k_tokens.size(1), top_k = top_k_tokens.size(2);
  const int64_t occurrences = steps * top_k;
  TVM_FFI_ICHECK(bs >= 1 && bs <= (int64_t{1} << 24)) << "top_k_tokens: batch must be in [1, 2^24], got " << bs;
  TVM_FFI_ICHECK(steps >= 1 && steps <= kMaxSteps) << "top_k_tokens: steps must be in [1, 4], got " << steps;
  TVM_FFI_ICHECK(top_k >= 1 && occurrences <= kMaxOccurrences)
      << "top_k_tokens: steps * top_k must be in [1, 8192], got " << steps << " * " << top_k;
  TVM_FFI_ICHECK(top_k_tokens.stride(2) == 1 && top_k_tokens.stride(1) == top_k)
      << "top_k_tokens: the inner [steps, top_k] dimensions must be contiguous";
  TVM_FFI_ICHECK(is_i32(top_k_device_locs) && top_k_device_locs.ndim() == 3 && top_k_device_locs.size(0) == bs &&
                 top_k_device_locs.size(1) == steps && top_k_device_locs.size(2) == top_k)
      << "top_k_device_locs: must be int32 with the shape of top_k_tokens";
  TVM_FFI_ICHECK(top_k_device_locs.stride(2) == 1 && top_k_device_locs.stride(1) == top_k)
      << "top_k_device_locs: the inner [steps, top_k] dimensions must be contiguous";
  check_same_device("top_k_device_locs", top_k_device_locs, dev);

  // ---- state ---------------------------------------------------------------------------------
  TVM_FFI_ICHECK(is_i32(ref_epochs) && ref_epochs.ndim() == 2) << "state.ref_epochs: must be int32 [R, HOT]";
  const int64_t num_req_slots = ref_epochs.size(0), hot = ref_epochs.size(1);
  TVM_FFI_ICHECK(num_req_slots >= 1) << "state.ref_epochs: needs at least one request slot";
  TVM_FFI_ICHECK(hot >= 2 && hot >= top_k && hot <= kMaxHot)
      << "hot_buffer_size must be in [max(top_k, 2), 32768], got " << hot << " (top_k " << top_k << ")";
  TVM_FFI_ICHECK(is_i64(hash_index) && hash_index.ndim() == 3 && hash_index.size(0) == num_req_slots &&
                 hash_index.size(1) == 2 && is_pow2(hash_index.size(2)) && hash_index.size(2) >= 2 * hot)
      << "state.hash_index: must be int64 [R, 2, H], H a power of two >= 2 * hot_buffer_size";
  const int64_t hash_size = hash_index.size(2);
  TVM_FFI_ICHECK(is_i32(clock) && clock.ndim() == 2 && clock.size(0) == num_req_slots && clock.size(1) == 2)
      << "state.clock: must be int32 [R, 2]";
  TVM_FFI_ICHECK(is_i32(counters) && counters.ndim() == 2 && counters.size(0) == num_req_slots && counters.size(1) == 4)
      << "state.counters: must be int32 [R, 4]";
  TVM_FFI_ICHECK(is_i32(scratch_locs) && scratch_locs.ndim() == 2 && scratch_locs.size(0) == num_req_slots)
      << "state.scratch_locs: must be int32 [R, C]";
  const int64_t capacity = scratch_locs.size(1);
  TVM_FFI_ICHECK(capacity >= 1 && capacity <= occurrences && capacity >= occurrences - hot)
      << "state.scratch_locs: capacity C must be in [max(1, T - hot_buffer_size), T], got " << capacity;
  TVM_FFI_ICHECK(is_i64(miss_keys) && miss_keys.ndim() == 2 && miss_keys.size(0) == num_req_slots &&
                 is_pow2(miss_keys.size(1)) && miss_keys.size(1) >= 2 * occurrences && miss_keys.size(1) <= kMaxMissTable)
      << "state.miss_keys: must be int64 [R, M], M a power of two in [2T, 16384]";
  const int64_t miss_table = miss_keys.size(1);
  TVM_FFI_ICHECK(is_i64(miss_vals) && miss_vals.ndim() == 2 && miss_vals.size(0) == num_req_slots &&
                 miss_vals.size(1) == miss_table)
      << "state.miss_vals: must be int64 with the shape of miss_keys";
  TVM_FFI_ICHECK(is_i32(miss_order) && miss_order.ndim() == 2 && miss_order.size(0) == num_req_slots &&
                 miss_order.size(1) == occurrences)
      << "state.miss_order: must be int32 [R, steps * top_k]";
  const char* state_names[] = {"state.hash_index", "state.ref_epochs", "state.clock", "state.counters",
                               "state.scratch_locs", "state.miss_keys", "state.miss_vals", "state.miss_order"};
  const TensorView* state_tensors[] = {&hash_index, &ref_epochs, &clock, &counters,
                                       &scratch_locs, &miss_keys, &miss_vals, &miss_order};
  for (int i = 0; i < 8; ++i) {
    check_contiguous(state_names[i], *state_tensors[i]);
    check_same_device(state_names[i], *state_tensors[i], dev);
  }

  // ---- slot tables, host locs, indices ---------------------------------------------------------
  TVM_FFI_ICHECK(is_i32(device_buffer_tokens) && device_buffer_tokens.ndim() == 2 &&
                 device_buffer_tokens.size(0) >= num_req_slots && device_buffer_tokens.size(1) > hot)
      << "device_buffer_tokens: must be int32 [>=R, hot_buffer_size + page_size], page_size >= 1";
  const int64_t page_size = device_buffer_tokens.size(1) - hot;
  TVM_FFI_ICHECK(is_i32(device_buffer_locs) && device_buffer_locs.ndim() == 2 &&
                 device_buffer_locs.size(0) == device_buffer_tokens.size(0) &&
                 device_buffer_locs.size(1) == device_buffer_tokens.size(1))
      << "device_buffer_locs: must be int32 with the shape of device_buffer_tokens";
  TVM_FFI_ICHECK(device_buffer_tokens.stride(1) == 1 && device_buffer_locs.stride(1) == 1 &&
                 device_buffer_tokens.stride(0) == device_buffer_locs.stride(0))
      << "device_buffer_tokens/locs: rows must be contiguous and share one row stride";
  TVM_FFI_ICHECK(is_i64(host_cache_locs) && host_cache_locs.ndim() == 2 && host_cache_locs.size(0) >= num_req_slots &&
                 host_cache_locs.size(1) >= 1 && host_cache_locs.size(1) <= (int64_t{1} << 31))
      << "host_cache_locs: must be int64 [>=R, max_len], max_len <= 2^31";
  check_contiguous("host_cache_locs", host_cache_locs);
  TVM_FFI_ICHECK((is_i32(req_pool_indices) || is_i64(req_pool_indices)) && req_pool_indices.ndim() == 1 &&
                 req_pool_indices.size(0) == bs)
      << "req_pool_indices: must be int32 or int64 [bs]";
  TVM_FFI_ICHECK((is_i32(seq_lens) || is_i64(seq_lens)) && seq_lens.ndim() == 1 && seq_lens.size(0) == bs * steps)
      << "seq_lens: must be int32 or int64 [bs * steps]";
  check_contiguous("req_pool_indices", req_pool_indices);
  check_contiguous("seq_lens", seq_lens);
  TVM_FFI_ICHECK(is_i32(num_real_reqs) && num_real_reqs.numel() == 1) << "num_real_reqs: must be int32 [1]";
  const char* dev_names[] = {"device_buffer_tokens", "device_buffer_locs", "host_cache_locs", "req_pool_indices",
                             "seq_lens", "num_real_reqs", "device_buffer"};
  const TensorView* dev_tensors[] = {&device_buffer_tokens, &device_buffer_locs, &host_cache_locs, &req_pool_indices,
                                     &seq_lens, &num_real_reqs, &device_buffer};
  for (int i = 0; i < 7; ++i) check_same_device(dev_names[i], *dev_tensors[i], dev);

  // ---- KV buffers ----------------------------------------------------------------------------
  TVM_FFI_ICHECK(item_size_bytes >= 1 && item_size_bytes <= kMaxItemBytes)
      << "item_size_bytes: must be in [1, 2^20], got " << item_size_bytes;
  check_contiguous("host_cache", host_cache);
  check_contiguous("device_buffer", device_buffer);
  TVM_FFI_ICHECK(host::device_addressable(host_cache) &&
                 (host_cache.device().device_type != kDLCUDA || host_cache.device().device_id == dev.device_id))
      << "host_cache: must be pinned host memory (or on the device of the other tensors)";
  const int64_t host_rows = host::nbytes(host_cache) / item_size_bytes;
  const int64_t device_rows = host::nbytes(device_buffer) / item_size_bytes;
  TVM_FFI_ICHECK(host_rows >= 1 && device_rows >= 1) << "host_cache/device_buffer: must hold at least one item";

  // ---- plan ----------------------------------------------------------------------------------
  int64_t* plan_src = nullptr;
  int32_t* plan_dst = nullptr;
  int32_t* plan_count = nullptr;
  int64_t stride_src = 0, stride_dst = 0;
  if constexpr (kRecordPlan) {
    TVM_FFI_ICHECK(miss_src.has_value() && miss_dst.has_value() && miss_count.has_value())
        << "miss_src, miss_dst, miss_count: required by the record_plan instantiation";
    const TensorView s = miss_src.value(), d = miss_dst.value(), n = miss_count.value();
    TVM_FFI_ICHECK(is_i64(s) && s.ndim() == 2 && s.size(0) >= bs && s.size(1) >= occurrences && s.stride(1) == 1)
        << "miss_src: must be int64 [>=bs, >=steps*top_k] with contiguous rows";
    TVM_FFI_ICHECK(is_i32(d) && d.ndim() == 2 && d.size(0) >= bs && d.size(1) >= occurrences && d.stride(1) == 1)
        << "miss_dst: must be int32 [>=bs, >=steps*top_k] with contiguous rows";
    TVM_FFI_ICHECK(is_i32(n) && n.ndim() == 1 && n.size(0) >= bs && n.stride(0) == 1)
        << "miss_count: must be int32 [>=bs], contiguous";
    check_same_device("miss_src", s, dev);
    check_same_device("miss_dst", d, dev);
    check_same_device("miss_count", n, dev);
    plan_src = ptr<int64_t>(s);
    plan_dst = ptr<int32_t>(d);
    plan_count = ptr<int32_t>(n);
    stride_src = s.stride(0);
    stride_dst = d.stride(0);
  } else {
    TVM_FFI_ICHECK(!miss_src.has_value() && !miss_dst.has_value() && !miss_count.has_value())
        << "miss_src, miss_dst, miss_count: this instantiation records no plan; pass None";
  }

  spec::SwapMultiParams p{};
  p.top_k_tokens = ptr<int32_t>(top_k_tokens);
  p.out = ptr<int32_t>(top_k_device_locs);
  p.buffer_tokens = ptr<int32_t>(device_buffer_tokens);
  p.buffer_locs = ptr<int32_t>(device_buffer_locs);
  p.host_cache_locs = ptr<int64_t>(host_cache_locs);
  p.host_cache = ptr<uint8_t>(host_cache);
  p.device_buffer = ptr<uint8_t>(device_buffer);
  p.req_pool_indices = ptr<uint8_t>(req_pool_indices);
  p.seq_lens = ptr<uint8_t>(seq_lens);
  p.num_real_reqs = ptr<int32_t>(num_real_reqs);
  p.hash_index = ptr<int64_t>(hash_index);
  p.ref_epochs = ptr<int32_t>(ref_epochs);
  p.clock = ptr<int32_t>(clock);
  p.counters = ptr<int32_t>(counters);
  p.scratch_locs = ptr<int32_t>(scratch_locs);
  p.miss_keys = ptr<int64_t>(miss_keys);
  p.miss_vals = ptr<int64_t>(miss_vals);
  p.miss_order = ptr<int32_t>(miss_order);
  p.miss_src = plan_src;
  p.miss_dst = plan_dst;
  p.miss_count = plan_count;
  p.top_k_stride = top_k_tokens.stride(0);
  p.out_stride = top_k_device_locs.stride(0);
  p.buffer_stride = device_buffer_tokens.stride(0);
  p.max_len = host_cache_locs.size(1);
  p.host_rows = host_rows;
  p.device_rows = device_rows;
  p.plan_stride_src = stride_src;
  p.plan_stride_dst = stride_dst;
  p.batch = static_cast<int32_t>(bs);
  p.steps = static_cast<int32_t>(steps);
  p.top_k = static_cast<int32_t>(top_k);
  p.occurrences = static_cast<int32_t>(occurrences);
  p.hot = static_cast<int32_t>(hot);
  p.page_size = static_cast<int32_t>(page_size);
  p.capacity = static_cast<int32_t>(capacity);
  p.num_req_slots = static_cast<int32_t>(num_req_slots);
  p.hash_mask = static_cast<uint32_t>(hash_size - 1);
  p.miss_mask = static_cast<uint32_t>(miss_table - 1);
  p.item_size_bytes = static_cast<uint32_t>(item_size_bytes);
  p.index_i64 = (is_i64(req_pool_indices) ? 1u : 0u) | (is_i64(seq_lens) ? 2u : 0u);

  host::DeviceGuard guard(dev.device_id);
  const cudaStream_t stream = host::stream_of(top_k_tokens);
  // The gather is an ordinary launch: it reads the caller's inputs (top-k from the indexer) at once.
  launch_gather<kPdl, kRecordPlan>(p, bs, occurrences, host_rows * item_size_bytes, dev.device_id, stream);
  host::launch(spec::spec_commit_kernel<kPdl, kRecordPlan>, dim3(static_cast<unsigned>(bs)), dim3(spec::kCommitThreads),
               spec::commit_smem_bytes(p.occurrences, p.hot), stream, kPdl, p);
}

}  // namespace hisparse
