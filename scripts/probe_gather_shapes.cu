// Probe: which copy structure moves scattered pinned-host rows fastest (issue 13, item 2).
//
// Why: on the `serving` pattern (each request's misses scattered through its own region of a GB-sized
// pinned pool) sequential LRU (one CTA per request, one row per warp) moved ~45 GB/s where the flat
// gather floor and the multi-step gather (all requests' rows in flight on every SM) moved 31-33 GB/s.
// This program times one gather of the same rows under several structures, so the kernels can adopt
// the best one by measurement instead of by guess. Standalone (CUDA runtime only, no torch).
//
//   nvcc -O3 -arch=sm_90 -std=c++17 scripts/probe_gather_shapes.cu -o /tmp/probe && /tmp/probe [batch]
//
// Pool: per request a context of 16k-128k tokens (uniform, seeded), regions back to back in request
// order, 576 B rows, as the `serving` workload lays them out. Per request 782 rows (upstream's
// unique misses per call) at scattered positions of its context; 8 such row sets, used in turn, so a
// timed gather never finds its rows in L2 (each set is 28.8 MB at batch 64; L2 is 60 MB).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>

#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e = (x);                                                                     \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

constexpr uint32_t kItem = 576;
constexpr uint32_t kWords = kItem / 16;

struct Rows {
  const int64_t* src;  // [batch * per] host rows, request-major
  const int32_t* dst;  // [batch * per] device rows
  int per;             // rows per request
  int batch;
};

// 1. Flat over all rows (the gather floor today): chunk c -> thread (c mod T), kL loads in flight.
template <int kL>
__global__ void flat_kernel(Rows r, const uint8_t* host, uint8_t* dev) {
  const uint32_t total = static_cast<uint32_t>(r.batch) * r.per * kWords;
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t base = blockIdx.x * blockDim.x + threadIdx.x; base < total; base += stride * kL) {
    uint4 v[kL];
#pragma unroll
    for (int j = 0; j < kL; ++j) {
      const uint32_t c = base + j * stride;
      if (c < total) v[j] = __ldg(reinterpret_cast<const uint4*>(host + r.src[c / kWords] * kItem) + c % kWords);
    }
#pragma unroll
    for (int j = 0; j < kL; ++j) {
      const uint32_t c = base + j * stride;
      if (c < total) __stcg(reinterpret_cast<uint4*>(dev + int64_t(r.dst[c / kWords]) * kItem) + c % kWords, v[j]);
    }
  }
}

// 2. Request-local, flat within the CTA: k CTAs per request; CTA t takes the request's rows t, t+k, ...
template <int kL>
__global__ void reqflat_kernel(Rows r, const uint8_t* host, uint8_t* dev, int k) {
  const int b = blockIdx.x / k, t = blockIdx.x % k;
  const int count = (r.per - t + k - 1) / k;
  const uint32_t total = count * kWords;
  const int64_t* src = r.src + int64_t(b) * r.per;
  const int32_t* dst = r.dst + int64_t(b) * r.per;
  for (uint32_t base = threadIdx.x; base < total; base += blockDim.x * kL) {
    uint4 v[kL];
#pragma unroll
    for (int j = 0; j < kL; ++j) {
      const uint32_t i = base + j * blockDim.x;
      if (i < total) v[j] = __ldg(reinterpret_cast<const uint4*>(host + src[t + (i / kWords) * k] * kItem) + i % kWords);
    }
#pragma unroll
    for (int j = 0; j < kL; ++j) {
      const uint32_t i = base + j * blockDim.x;
      if (i < total) __stcg(reinterpret_cast<uint4*>(dev + int64_t(dst[t + (i / kWords) * k]) * kItem) + i % kWords, v[j]);
    }
  }
}

// 3. Request-local, one row per warp at a time (sequential LRU's structure): lane l moves words l, l+32.
__global__ void reqwarp_kernel(Rows r, const uint8_t* host, uint8_t* dev, int k) {
  const int b = blockIdx.x / k, t = blockIdx.x % k;
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int64_t* src = r.src + int64_t(b) * r.per;
  const int32_t* dst = r.dst + int64_t(b) * r.per;
  for (int i = t + k * (threadIdx.x / 32); i < r.per; i += k * warps) {
    const uint4* s = reinterpret_cast<const uint4*>(host + src[i] * kItem);
    uint4* d = reinterpret_cast<uint4*>(dev + int64_t(dst[i]) * kItem);
    uint4 v0 = __ldg(s + lane), v1;
    if (lane + 32 < kWords) v1 = __ldg(s + lane + 32);
    __stcg(d + lane, v0);
    if (lane + 32 < kWords) __stcg(d + lane + 32, v1);
  }
}

// 4. Warp per row over all rows (gather_warp_kernel's structure): warps interleave requests.
__global__ void warp_kernel(Rows r, const uint8_t* host, uint8_t* dev) {
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(r.batch) * r.per;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; i < n; i += warps) {
    const uint4* s = reinterpret_cast<const uint4*>(host + r.src[i] * kItem);
    uint4* d = reinterpret_cast<uint4*>(dev + int64_t(r.dst[i]) * kItem);
    uint4 v0 = __ldg(s + lane), v1;
    if (lane + 32 < kWords) v1 = __ldg(s + lane + 32);
    __stcg(d + lane, v0);
    if (lane + 32 < kWords) __stcg(d + lane + 32, v1);
  }
}

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 64;
  const int per = 782, sets = 8, reps = 24;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::mt19937_64 rng(0);
  std::vector<int64_t> ctx(batch), base(batch);
  int64_t pool_rows = 0;
  for (int b = 0; b < batch; ++b) {
    ctx[b] = 16384 + int64_t(rng() % (131072 - 16384 + 1));
    base[b] = pool_rows;
    pool_rows += ctx[b];
  }
  // argv[2]: how the pool is pinned. hostalloc = cudaHostAlloc (what torch's pinned allocator calls);
  // register = malloc + cudaHostRegister; huge = 2 MB-aligned mmap + MADV_HUGEPAGE + cudaHostRegister.
  const char* alloc = argc > 2 ? argv[2] : "hostalloc";
  const bool shapes = !(argc > 3 && std::string(argv[3]) == "quick");
  uint8_t* host = nullptr;
  const size_t pool_bytes = size_t(pool_rows) * kItem;
  if (std::string(alloc) == "hostalloc") {
    CK(cudaHostAlloc(&host, pool_bytes, cudaHostAllocDefault));
  } else if (std::string(alloc) == "register") {
    host = static_cast<uint8_t*>(std::malloc(pool_bytes));
    for (size_t i = 0; i < pool_bytes; i += 4096) host[i] = 0;
    CK(cudaHostRegister(host, pool_bytes, cudaHostRegisterDefault));
  } else {
    const size_t huge = (pool_bytes + (2u << 20) - 1) & ~size_t((2u << 20) - 1);
    void* m = mmap(nullptr, huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { std::perror("mmap"); return 1; }
    madvise(m, huge, MADV_HUGEPAGE);
    host = static_cast<uint8_t*>(m);
    for (size_t i = 0; i < pool_bytes; i += 4096) host[i] = 0;
    CK(cudaHostRegister(host, huge, cudaHostRegisterDefault));
  }
  for (size_t i = 0; i < size_t(pool_rows) * kItem; i += 4096) host[i] = uint8_t(i >> 12);  // touch every page
  const int n = batch * per;
  uint8_t* dev = nullptr;
  CK(cudaMalloc(&dev, size_t(n) * kItem));
  std::vector<int32_t> hdst(n);
  std::iota(hdst.begin(), hdst.end(), 0);
  std::shuffle(hdst.begin(), hdst.end(), rng);  // device rows in no particular order, as scratch slots are
  int32_t* ddst = nullptr;
  CK(cudaMalloc(&ddst, n * sizeof(int32_t)));
  CK(cudaMemcpy(ddst, hdst.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice));

  enum Pattern { kScattered, kSorted, kConsecutive };
  const char* pattern_names[] = {"scattered", "sorted", "consecutive"};
  std::printf("[%s] ", alloc);
  std::printf("batch %d, %d rows/request, %d x 576 B rows per gather (%.1f MB), pool %.2f GB, %d SMs\n", batch, per, n,
              n * double(kItem) / 1e6, pool_rows * double(kItem) / 1e9, sms);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  for (int pat = 0; pat < 3; ++pat) {
    std::vector<int64_t*> dsrc(sets);
    for (int s = 0; s < sets; ++s) {
      std::vector<int64_t> src(n);
      for (int b = 0; b < batch; ++b) {
        int64_t* out = src.data() + int64_t(b) * per;
        if (pat == kConsecutive) {
          const int64_t start = int64_t(rng() % (ctx[b] - per));
          for (int i = 0; i < per; ++i) out[i] = base[b] + start + i;
        } else {
          std::vector<int64_t> pick;  // per distinct positions of the context (rejection: per << ctx)
          while (int(pick.size()) < per) {
            const int64_t p = int64_t(rng() % ctx[b]);
            if (std::find(pick.begin(), pick.end(), p) == pick.end()) pick.push_back(p);
          }
          if (pat == kSorted) std::sort(pick.begin(), pick.end());
          for (int i = 0; i < per; ++i) out[i] = base[b] + pick[i];
        }
      }
      CK(cudaMalloc(&dsrc[s], n * sizeof(int64_t)));
      CK(cudaMemcpy(dsrc[s], src.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    }
    auto time = [&](const char* name, auto&& launch) {
      std::vector<float> ms;
      for (int i = 0; i < reps + 2; ++i) {
        Rows r{dsrc[i % sets], ddst, per, batch};
        CK(cudaEventRecord(e0));
        launch(r);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (i >= 2) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2] * 1e3;
      std::printf("%-12s %-34s %9.1f us %7.1f GB/s\n", pattern_names[pat], name, med, n * double(kItem) / med / 1e3);
    };
    char label[64];
    if (!shapes) {
      time("flat L4 grid 4/SM x 256", [&](Rows r) { flat_kernel<4><<<4 * sms, 256>>>(r, host, dev); });
      time("req-local warp/row k1 x 1024", [&](Rows r) { reqwarp_kernel<<<batch, 1024>>>(r, host, dev, 1); });
      for (auto* p : dsrc) CK(cudaFree(p));
      continue;
    }
    for (int g : {sms, 2 * sms, 4 * sms})
      for (int bs : {256}) {
        std::snprintf(label, sizeof label, "flat L1 grid %d x %d", g, bs);
        time(label, [&](Rows r) { flat_kernel<1><<<g, bs>>>(r, host, dev); });
        std::snprintf(label, sizeof label, "flat L2 grid %d x %d", g, bs);
        time(label, [&](Rows r) { flat_kernel<2><<<g, bs>>>(r, host, dev); });
        std::snprintf(label, sizeof label, "flat L4 grid %d x %d", g, bs);
        time(label, [&](Rows r) { flat_kernel<4><<<g, bs>>>(r, host, dev); });
        std::snprintf(label, sizeof label, "flat L8 grid %d x %d", g, bs);
        time(label, [&](Rows r) { flat_kernel<8><<<g, bs>>>(r, host, dev); });
      }
    for (int g : {sms, 4 * sms}) {
      std::snprintf(label, sizeof label, "warp/row grid %d x 256", g);
      time(label, [&](Rows r) { warp_kernel<<<g, 256>>>(r, host, dev); });
    }
    // k 16-132: batch 1's question (twenty-second session): does one request's copy get faster on more
    // SMs? The multi-step gather copies batch 1's rows from 32 CTAs.
    for (int k : {1, 2, 4, 8, 16, 32, 64, 132})
      for (int bs : {256, 1024}) {
        if (k >= 16 && bs == 1024) continue;
        std::snprintf(label, sizeof label, "req-local warp/row k%d x %d", k, bs);
        time(label, [&](Rows r) { reqwarp_kernel<<<batch * k, bs>>>(r, host, dev, k); });
        std::snprintf(label, sizeof label, "req-local flat L2 k%d x %d", k, bs);
        time(label, [&](Rows r) { reqflat_kernel<2><<<batch * k, bs>>>(r, host, dev, k); });
        std::snprintf(label, sizeof label, "req-local flat L4 k%d x %d", k, bs);
        time(label, [&](Rows r) { reqflat_kernel<4><<<batch * k, bs>>>(r, host, dev, k); });
      }
    for (auto* p : dsrc) CK(cudaFree(p));
  }
  // Pinned copy ceiling of this process (the PCIe floor's bandwidth).
  {
    const size_t bytes = size_t(n) * kItem;
    std::vector<float> ms;
    for (int i = 0; i < 10; ++i) {
      CK(cudaEventRecord(e0));
      CK(cudaMemcpyAsync(dev, host + (i % 4) * bytes, bytes, cudaMemcpyHostToDevice));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float t = 0;
      CK(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-12s %-34s %9.1f us %7.1f GB/s\n", "contiguous", "cudaMemcpyAsync H2D", ms[5] * 1e3,
                bytes / (ms[5] * 1e3) / 1e3);
  }
  return 0;
}
