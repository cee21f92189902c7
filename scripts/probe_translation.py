#!/usr/bin/env python3
"""What bounds a gather of scattered pinned-host rows when the GPU's translations of host addresses are
cold (the decode regime): a standalone CUDA probe, built with nvcc and run on one GPU.

usage: python3 scripts/probe_translation.py [--out FILE.jsonl] [--arch sm_90] [--quick]

It pins one host arena (24 GiB; 8 GiB with --quick), cuts it into layer pools and times, in us per call:
  conc     the flat gather (hisparse's floor kernel) over grids x loads in flight per thread, rows
           scattered: whether more reads in flight buy bandwidth cold as they do warm;
  pages    rows in runs of c consecutive rows (c = 1 .. 128) at a fixed byte count: time against the
           distinct 4 KiB / 64 KiB / 2 MiB host pages a call touches;
  touch    one 4-byte load per distinct 4 KiB page of a call, 1 load in flight per thread, over a range
           of threads: the translations per us the GPU completes at each parallelism;
  prefetch a touch of the call's distinct 4 KiB, 64 KiB or 2 MiB pages, then the gather: whether
           translations installed ahead make the copy warm, and what the two cost together;
  pool     scattered rows over pools of 1, 3, 12 GB per layer.
Cold: each call on the next of L layer pools (the harness's decode regime); warm: every call on one
pool. Rows are new on every call (8 row sets per pool), so no row is read from L2 again.
Each line of --out is one measurement (JSON); a table is printed. docs/perf-notes.md quotes its output
(2026-12-04: what bounds the decode-regime gather).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = r"""
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int kItem = 576;           // bytes per row (DeepSeek-V3.2's MLA KV row)
constexpr int kWords = kItem / 16;   // 16-byte words per row
constexpr int kBatch = 64, kRows = 782;  // rows per request per call: `serving` batch 64's misses
constexpr int kSets = 8;             // row sets per pool, used in turn (no row re-read from L2)

// hisparse's gather_flat_kernel (csrc/include/hisparse/gather.cuh) for 16-byte words, dst rows 0..n-1.
template <int K>
__global__ void __launch_bounds__(512) gather(const int64_t* rows, int n, const uint4* host, uint4* dst) {
  const uint32_t per = (n + gridDim.x - 1) / gridDim.x, first = blockIdx.x * per;
  if (first >= (uint32_t)n) return;
  const uint32_t cnt = min(per, n - first), total = cnt * kWords;
  for (uint32_t base = threadIdx.x; base < total; base += blockDim.x * K) {
    uint4 v[K];
#pragma unroll
    for (int j = 0; j < K; ++j) { uint32_t c = base + j * blockDim.x;
      if (c < total) { uint32_t r = c / kWords; v[j] = __ldg(host + rows[first + r] * kWords + (c - r * kWords)); } }
#pragma unroll
    for (int j = 0; j < K; ++j) { uint32_t c = base + j * blockDim.x;
      if (c < total) { uint32_t r = c / kWords; __stcg(dst + (int64_t)(first + r) * kWords + (c - r * kWords), v[j]); } }
  }
}

// The same copy with the words of all rows interleaved over the whole grid: at any time the grid's loads
// cover one window of consecutive rows of the list (on a list sorted by address, one window of the pool).
template <int K>
__global__ void __launch_bounds__(512) gather_wave(const int64_t* rows, int n, const uint4* host, uint4* dst) {
  const uint32_t total = n * kWords, stride = gridDim.x * blockDim.x;
  for (uint32_t base = blockIdx.x * blockDim.x + threadIdx.x; base < total; base += stride * K) {
    uint4 v[K];
#pragma unroll
    for (int j = 0; j < K; ++j) { uint32_t c = base + j * stride;
      if (c < total) { uint32_t r = c / kWords; v[j] = __ldg(host + rows[r] * kWords + (c - r * kWords)); } }
#pragma unroll
    for (int j = 0; j < K; ++j) { uint32_t c = base + j * stride;
      if (c < total) { uint32_t r = c / kWords; __stcg(dst + (int64_t)r * kWords + (c - r * kWords), v[j]); } }
  }
}

// One 4-byte load per address, one in flight per thread (the sum is used before the next load).
__global__ void touch(const int64_t* offs, int n, const char* base, int* sink) {
  int s = 0;
#pragma unroll 1
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    s += *reinterpret_cast<const volatile int*>(base + offs[i]);
  if (s == 0x7fffffff) *sink = s;
}

struct Call { int64_t* rows; int n; int64_t* pg[3]; int npg[3]; };  // pages: 4K, 64K, 2M (byte offsets)

static std::vector<int64_t> layout(std::mt19937_64& g, int64_t region_rows, int chunk) {
  std::vector<int64_t> out;
  std::unordered_set<int64_t> used;
  const int64_t nchunks = region_rows / chunk;
  std::uniform_int_distribution<int64_t> d(0, nchunks - 1);
  for (int b = 0; b < kBatch; ++b) {
    int got = 0;
    while (got < kRows) {
      int64_t c = d(g);
      if (!used.insert(b * nchunks + c).second) continue;
      for (int i = 0; i < chunk && got < kRows; ++i, ++got) out.push_back(b * region_rows + c * chunk + i);
    }
  }
  return out;
}

static int64_t* to_dev(const std::vector<int64_t>& v) {
  int64_t* p; CK(cudaMalloc(&p, v.size() * 8)); CK(cudaMemcpy(p, v.data(), v.size() * 8, cudaMemcpyHostToDevice)); return p;
}

// Calls of one pool layout: L layers x kSets row sets, each with its page lists (offsets from the arena).
static std::vector<Call> make_calls(int layers, int64_t pool_bytes, int chunk, uint64_t seed, bool sort_rows = false,
                                    bool shuffle_pages = false) {
  std::vector<Call> calls;
  const int64_t region_rows = pool_bytes / kBatch / kItem;
  const int64_t gran[3] = {4096, 65536, 2 << 20};
  for (int l = 0; l < layers; ++l) for (int s = 0; s < kSets; ++s) {
    std::mt19937_64 g(seed * 1000003 + l * 131 + s);
    auto rows = layout(g, region_rows, chunk);
    for (auto& r : rows) r += l * (pool_bytes / kItem);
    if (sort_rows) std::sort(rows.begin(), rows.end());
    Call c{}; c.rows = to_dev(rows); c.n = (int)rows.size();
    for (int k = 0; k < 3; ++k) {
      std::unordered_set<int64_t> pages;
      for (auto r : rows) { pages.insert(r * kItem / gran[k]); pages.insert((r * kItem + kItem - 1) / gran[k]); }
      std::vector<int64_t> offs;
      // Line (s % 32) of the page: a warm touch of the same page is not an L2 hit of the last touch.
      for (auto p : pages) offs.push_back(p * gran[k] + (s % 32) * 128);
      std::sort(offs.begin(), offs.end());
      if (shuffle_pages) std::shuffle(offs.begin(), offs.end(), g);
      c.pg[k] = to_dev(offs); c.npg[k] = (int)offs.size();
    }
    calls.push_back(c);
  }
  return calls;
}

static char* g_host; static uint4* g_dst; static int* g_sink; static cudaStream_t g_s;

template <int K> static void launch_gather(const Call& c, int grid, int threads) {
  gather<K><<<grid, threads, 0, g_s>>>(c.rows, c.n, reinterpret_cast<const uint4*>(g_host), g_dst);
}
static bool g_wave = false;
static void launch_k(int k, const Call& c, int grid, int threads) {
  if (g_wave) {
    switch (k) { case 1: gather_wave<1><<<grid, threads, 0, g_s>>>(c.rows, c.n, (const uint4*)g_host, g_dst); break;
                 case 2: gather_wave<2><<<grid, threads, 0, g_s>>>(c.rows, c.n, (const uint4*)g_host, g_dst); break;
                 case 4: gather_wave<4><<<grid, threads, 0, g_s>>>(c.rows, c.n, (const uint4*)g_host, g_dst); break;
                 default: gather_wave<8><<<grid, threads, 0, g_s>>>(c.rows, c.n, (const uint4*)g_host, g_dst); }
    return;
  }
  switch (k) { case 1: launch_gather<1>(c, grid, threads); break; case 2: launch_gather<2>(c, grid, threads); break;
               case 4: launch_gather<4>(c, grid, threads); break; default: launch_gather<8>(c, grid, threads); }
}

// us per call: `rounds` passes over the calls in order (cold: layer after layer; warm: one layer's row
// sets), the median pass. what: 0 gather, 1 touch pages[k], 2 touch pages[k] then gather.
struct Op { int what, k, grid, threads, loads, touch_grid; };
static void run_op(const Op& o, const Call& c) {
  if (o.what == 1) touch<<<o.grid, o.threads, 0, g_s>>>(c.pg[o.k], c.npg[o.k], g_host, g_sink);
  if (o.what == 2) touch<<<o.touch_grid, 256, 0, g_s>>>(c.pg[o.k], c.npg[o.k], g_host, g_sink);
  if (o.what != 1) launch_k(o.loads, c, o.grid, o.threads);
}
static double time_calls(const std::vector<const Call*>& seq, const Op& o, int rounds) {
  for (auto* c : seq) run_op(o, *c);  // warm-up pass
  std::vector<double> per;
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int r = 0; r < rounds; ++r) {
    CK(cudaEventRecord(a, g_s));
    for (auto* c : seq) run_op(o, *c);
    CK(cudaEventRecord(b, g_s)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); per.push_back(1000.0 * ms / seq.size());
  }
  CK(cudaGetLastError());
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}
static std::vector<const Call*> cold_seq(const std::vector<Call>& calls, int layers) {
  std::vector<const Call*> s;  // set-major, layer-minor: consecutive calls on different pools
  for (int set = 0; set < kSets; ++set) for (int l = 0; l < layers; ++l) s.push_back(&calls[l * kSets + set]);
  return s;
}
static std::vector<const Call*> warm_seq(const std::vector<Call>& calls, int layers) {
  std::vector<const Call*> s;
  for (int rep = 0; rep < layers; ++rep) for (int set = 0; set < kSets; ++set) s.push_back(&calls[set]);
  return s;
}

static void emit(const char* sweep, const std::string& key, const char* regime, const Call& c, double us, int64_t pool) {
  const double bytes = (double)c.n * kItem;
  printf("{\"sweep\":\"%s\",%s,\"regime\":\"%s\",\"pool_gb\":%.1f,\"rows\":%d,\"pages_4k\":%d,\"pages_64k\":%d,"
         "\"pages_2m\":%d,\"us\":%.1f,\"gbps\":%.2f}\n", sweep, key.c_str(), regime, pool / 1e9, c.n, c.npg[0], c.npg[1],
         c.npg[2], us, bytes / us / 1e3);
  fflush(stdout);
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && !strcmp(argv[1], "--quick");
  const int64_t arena = (quick ? 8LL : 24LL) << 30;
  CK(cudaSetDevice(0));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaHostAlloc(&g_host, arena, cudaHostAllocDefault));
  CK(cudaMalloc(&g_dst, (size_t)kBatch * kRows * kItem * 2)); CK(cudaMalloc(&g_sink, 4));
  CK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
  const int rounds = quick ? 3 : 5;
  const int64_t pool3 = 3LL << 30;
  const int L3 = (int)(arena / pool3);
  char key[256];

  if (argc > 1 && !strcmp(argv[argc - 1], "--order")) {
    // order: rows in top-k order or sorted by address; runs per CTA or waves over the grid; touches sorted
    // or shuffled
    for (int sorted = 0; sorted < 2; ++sorted) {
      auto calls = make_calls(L3, pool3, 1, 1, sorted, !sorted);
      auto cs = cold_seq(calls, L3), ws = warm_seq(calls, L3);
      for (int wave = 0; wave < 2; ++wave) for (int grid : {sms, 2 * sms, 4 * sms}) for (int k : {1, 4}) {
        g_wave = wave;
        Op o{0, 0, grid, 256, k, 0};
        snprintf(key, sizeof key, "\"sorted\":%d,\"wave\":%d,\"grid\":%d,\"loads\":%d", sorted, wave, grid, k);
        emit("order", key, "cold", calls[0], time_calls(cs, o, rounds), pool3);
        emit("order", key, "warm", calls[0], time_calls(ws, o, rounds), pool3);
      }
      g_wave = false;
      for (int tt : {sms * 32, sms * 256, sms * 2048}) {
        Op o{1, 0, tt / 256, 256, 1, 0};
        if (tt < sms * 256) { o.grid = sms; o.threads = tt / sms; }
        snprintf(key, sizeof key, "\"touch_sorted\":%d,\"threads\":%d", sorted, tt);
        emit("order", key, "cold", calls[0], time_calls(cs, o, rounds), pool3);
      }
      for (auto& c : calls) { cudaFree(c.rows); for (auto* p : c.pg) cudaFree(p); }
    }
    return 0;
  }
  auto scattered = make_calls(L3, pool3, 1, 1);
  auto cold = cold_seq(scattered, L3), warm = warm_seq(scattered, L3);
  // conc: grid x loads, 256 threads
  for (int grid : {sms / 2, sms, 2 * sms, 4 * sms, 8 * sms}) for (int k : {1, 2, 4, 8}) {
    Op o{0, 0, grid, 256, k, 0};
    snprintf(key, sizeof key, "\"grid\":%d,\"loads\":%d", grid, k);
    emit("conc", key, "cold", scattered[0], time_calls(cold, o, rounds), pool3);
    emit("conc", key, "warm", scattered[0], time_calls(warm, o, rounds), pool3);
  }
  // touch: translations per us at 1 load in flight per thread
  for (int threads_total : {sms * 32, sms * 128, sms * 512, sms * 1024, sms * 2048}) {
    Op o{1, 0, threads_total / 256, 256, 1, 0};
    if (threads_total < sms * 256) { o.grid = sms; o.threads = threads_total / sms; }
    snprintf(key, sizeof key, "\"threads\":%d,\"page\":\"4k\"", o.grid * o.threads);
    emit("touch", key, "cold", scattered[0], time_calls(cold, o, rounds), pool3);
    emit("touch", key, "warm", scattered[0], time_calls(warm, o, rounds), pool3);
  }
  // prefetch: touch pages of each granularity, then the gather (floor shape: one CTA per SM, 4 loads)
  for (int k = 0; k < 3; ++k) {
    const char* names[3] = {"4k", "64k", "2m"};
    Op t{1, k, 4 * sms, 256, 1, 0}, both{2, k, sms, 256, 4, 4 * sms};
    snprintf(key, sizeof key, "\"page\":\"%s\",\"part\":\"touch\"", names[k]);
    emit("prefetch", key, "cold", scattered[0], time_calls(cold, t, rounds), pool3);
    snprintf(key, sizeof key, "\"page\":\"%s\",\"part\":\"touch+gather\"", names[k]);
    emit("prefetch", key, "cold", scattered[0], time_calls(cold, both, rounds), pool3);
  }
  for (auto& c : scattered) { cudaFree(c.rows); for (auto* p : c.pg) cudaFree(p); }

  // pages: runs of c consecutive rows, fixed bytes
  for (int chunk : {1, 2, 4, 7, 16, 64, 128}) {
    auto calls = make_calls(L3, pool3, chunk, 2);
    auto cs = cold_seq(calls, L3), ws = warm_seq(calls, L3);
    Op o{0, 0, sms, 256, 4, 0};
    snprintf(key, sizeof key, "\"chunk\":%d", chunk);
    emit("pages", key, "cold", calls[0], time_calls(cs, o, rounds), pool3);
    emit("pages", key, "warm", calls[0], time_calls(ws, o, rounds), pool3);
    for (auto& c : calls) { cudaFree(c.rows); for (auto* p : c.pg) cudaFree(p); }
  }
  // pool: scattered rows, pool per layer
  for (int64_t gb : {1LL, 3LL, 12LL}) {
    const int64_t pool = gb << 30;
    const int L = (int)std::min<int64_t>(8, arena / pool);
    if (L < 2) continue;
    auto calls = make_calls(L, pool, 1, 3);
    auto cs = cold_seq(calls, L), ws = warm_seq(calls, L);
    for (int grid : {sms, 4 * sms}) {
      Op o{0, 0, grid, 256, 4, 0};
      snprintf(key, sizeof key, "\"layers\":%d,\"grid\":%d", L, grid);
      emit("pool", key, "cold", calls[0], time_calls(cs, o, rounds), pool);
      emit("pool", key, "warm", calls[0], time_calls(ws, o, rounds), pool);
    }
    for (auto& c : calls) { cudaFree(c.rows); for (auto* p : c.pg) cudaFree(p); }
  }
  return 0;
}
"""


def build(arch: str, workdir: Path) -> Path:
    src, exe = workdir / "probe_translation.cu", workdir / "probe_translation"
    src.write_text(SOURCE)
    subprocess.run(["nvcc", "-O3", "-std=c++17", f"-arch={arch}", "-o", str(exe), str(src)], check=True)
    return exe


def table(lines: list[dict]) -> str:
    out = [f"{'sweep':9} {'parameters':34} {'regime':6} {'pool':>5} {'pages4k':>8} {'pages2m':>8} {'us':>9} {'GB/s':>7}"]
    for m in lines:
        params = ",".join(f"{k}={m[k]}" for k in m if k not in
                          ("sweep", "regime", "pool_gb", "rows", "pages_4k", "pages_64k", "pages_2m", "us", "gbps"))
        out.append(f"{m['sweep']:9} {params:34} {m['regime']:6} {m['pool_gb']:5.1f} {m['pages_4k']:8} "
                   f"{m['pages_2m']:8} {m['us']:9.1f} {m['gbps']:7.2f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", type=Path, help="JSON lines, one per measurement")
    ap.add_argument("--arch", default="sm_90", help="nvcc -arch (default sm_90: H100/H200)")
    ap.add_argument("--quick", action="store_true", help="an 8 GiB arena and 3 passes per figure")
    ap.add_argument("--order", action="store_true",
                    help="only the order sweep: rows in top-k order or sorted by address, per-CTA runs or grid waves")
    ap.add_argument("--build-only", action="store_true", help="compile the probe and stop (no GPU needed)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(args.arch, Path(tmp))
        if args.build_only:
            print(f"built {exe.name} for {args.arch}")
            return 0
        proc = subprocess.Popen([str(exe), *(["--quick"] if args.quick else []), *(["--order"] if args.order else [])], stdout=subprocess.PIPE, text=True)
        lines = []
        for raw in proc.stdout:
            m = json.loads(raw)
            lines.append(m)
            print(table([m]).splitlines()[1], flush=True)
            if args.out:
                with args.out.open("a") as f:
                    f.write(raw)
        rc = proc.wait()
    print(table(lines))
    return rc


if __name__ == "__main__":
    sys.exit(main())
