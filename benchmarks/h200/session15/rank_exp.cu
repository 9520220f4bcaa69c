// Throwaway experiment, not built with the lab (nvcc -O3 -arch=sm_90 rank_exp.cu): what bounds
// topk v10's counted rank at ~5,000 keys.
// The same algorithm as topk_count_rank (every block loads the whole list into shared memory,
// ranks a share by counting greater keys), with variations, each checked against the baseline.
// The logs' "same output 0" at n = 118 is this program's bug: the first baseline launch ran
// before its shared-memory attribute was set, and failed; the times are not affected.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>

#define CK(x)                                        \
  do {                                               \
    cudaError_t e = (x);                             \
    if (e != cudaSuccess) {                          \
      printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      exit(1);                                       \
    }                                                \
  } while (0)

constexpr int kThreads = 1024;
constexpr uint32_t kCap = 8192;
constexpr size_t kSmem = kCap * 8 + 4096 * 4 + kCap * 4;

// MODE bits: 1 = stagger the load start by block, 2 = skip the count (load + write only),
// 4 = skip the load (count over whatever smem holds; output meaningless), 8 = 16-byte loads
template <int MODE, int COUNT = 0>
__global__ void __launch_bounds__(kThreads) rank_kernel(const uint64_t* list, const uint32_t* count,
                                                        uint32_t k, uint32_t width, float* kp) {
  extern __shared__ __align__(16) uint64_t keys[];
  uint32_t* greater = reinterpret_cast<uint32_t*>(keys + kCap);
  const uint32_t n = __ldcg(count);
  const uint32_t share = (n + gridDim.x - 1) / gridDim.x;
  const uint32_t begin = min(n, blockIdx.x * share), end = min(n, begin + share);
  if (begin < end && !(MODE & 4)) {
    if (MODE & 8) {
      const uint32_t pairs = (n + 1) / 2;
      const uint32_t off = (MODE & 1) ? (blockIdx.x * 97u) % pairs : 0;
      for (uint32_t r = 0; r < pairs; r += kThreads * 4) {
        ulonglong2 v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t i = r + j * kThreads + threadIdx.x;
          if (i < pairs) {
            i += off;
            if (i >= pairs) i -= pairs;
            v[j] = __ldcg(reinterpret_cast<const ulonglong2*>(list) + i);
          }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t i = r + j * kThreads + threadIdx.x;
          if (i < pairs) {
            i += off;
            if (i >= pairs) i -= pairs;
            reinterpret_cast<ulonglong2*>(keys)[i] = v[j];
          }
        }
      }
      if (threadIdx.x == 0 && (n & 1u)) keys[n] = 0;
    } else {
      const uint32_t off = (MODE & 1) ? (blockIdx.x * 389u) % n : 0;
      for (uint32_t r = 0; r < n; r += kThreads * 4) {
        uint64_t v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t i = r + j * kThreads + threadIdx.x;
          if (i < n) {
            i += off;
            if (i >= n) i -= n;
            v[j] = __ldcg(&list[i]);
          }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t i = r + j * kThreads + threadIdx.x;
          if (i < n) {
            i += off;
            if (i >= n) i -= n;
            keys[i] = v[j];
          }
        }
      }
      if (threadIdx.x == 0 && (n & 1u)) keys[n] = 0;
    }
  }
  const ulonglong2* pairs = reinterpret_cast<const ulonglong2*>(keys);
  for (uint32_t first = begin; first < end; first += kThreads) {
    const uint32_t per = min(end - first, uint32_t(kThreads)), slices = kThreads / per;
    if (threadIdx.x < per) greater[threadIdx.x] = 0;
    __syncthreads();
    const uint32_t c = threadIdx.x % per, s = threadIdx.x / per;
    if (s < slices && !(MODE & 2)) {
      const uint64_t mine = keys[first + c];
      uint32_t g = 0;
      if (COUNT == 0) {
#pragma unroll 4
        for (uint32_t j = s; j < (n + 1) / 2; j += slices) {
          const ulonglong2 two = pairs[j];
          g += (two.x > mine) + (two.y > mine);
        }
      } else if (COUNT == 1) {  // predicated increments
#pragma unroll 4
        for (uint32_t j = s; j < (n + 1) / 2; j += slices) {
          const ulonglong2 two = pairs[j];
          if (two.x > mine) ++g;
          if (two.y > mine) ++g;
        }
      } else if (COUNT == 2) {  // two accumulators, unroll 8
        uint32_t g2 = 0;
#pragma unroll 8
        for (uint32_t j = s; j < (n + 1) / 2; j += slices) {
          const ulonglong2 two = pairs[j];
          g += two.x > mine;
          g2 += two.y > mine;
        }
        g += g2;
      } else if (COUNT == 3) {  // the high words first: 32-bit compares, the low word on a tie
        const uint32_t mh = uint32_t(mine >> 32), ml = uint32_t(mine);
        const uint4* quads = reinterpret_cast<const uint4*>(keys);
#pragma unroll 4
        for (uint32_t j = s; j < (n + 1) / 2; j += slices) {
          const uint4 q = quads[j];  // x: lo0, y: hi0, z: lo1, w: hi1
          g += (q.y > mh) + (q.w > mh);
          if (q.y == mh && q.x > ml) ++g;
          if (q.w == mh && q.z > ml) ++g;
        }
      } else if (COUNT == 4) {  // signed 64-bit compare of the keys with the top bit flipped
        const long long m = (long long)(mine ^ 0x8000000000000000ull);
#pragma unroll 4
        for (uint32_t j = s; j < (n + 1) / 2; j += slices) {
          const ulonglong2 two = pairs[j];
          g += ((long long)(two.x ^ 0x8000000000000000ull) > m) +
               ((long long)(two.y ^ 0x8000000000000000ull) > m);
        }
      }
      atomicAdd(&greater[c], g);
    }
    __syncthreads();
    if (threadIdx.x < per && greater[threadIdx.x] < k) {
      const uint64_t mine = keys[first + threadIdx.x];
      const uint32_t idx = 0xFFFFFFFFu - uint32_t(mine);
      const int row = int(greater[threadIdx.x]);
      kp[row] = float(idx % width), kp[k + row] = float(idx / width),
      kp[2 * k + row] = float(mine >> 40);
    }
    __syncthreads();
  }
  for (uint32_t i = min(n, k) + blockIdx.x * kThreads + threadIdx.x; i < k;
       i += gridDim.x * kThreads)
    kp[i] = -1.0f, kp[k + i] = -1.0f, kp[2 * k + i] = 0.0f;
}

template <int MODE, int COUNT = 0>
float time_it(int grid, const uint64_t* list, const uint32_t* cnt, uint32_t k, float* kp) {
  CK(cudaFuncSetAttribute(rank_kernel<MODE, COUNT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          int(kSmem)));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int rep = 0; rep < 7; ++rep) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < 20; ++i)
      rank_kernel<MODE, COUNT><<<grid, kThreads, kSmem>>>(list, cnt, k, 3840, kp);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000 / 20);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[3];
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const uint32_t k = 4096;
  for (uint32_t n : {118u, 1001u, 3000u, 4416u, 5339u, 8000u}) {
    std::mt19937_64 rng(n);
    std::vector<uint64_t> h(n);
    for (uint32_t i = 0; i < n; ++i) {  // distinct keys, top bit set (positive scores)
      const uint32_t score = 0xB0000000u + uint32_t(rng() % 0x08000000u);
      h[i] = (uint64_t(score) << 32) | (0xFFFFFFFFu - (uint32_t(rng() % 8000000u) * 0 + i * 1553u));
    }
    uint64_t* list;
    uint32_t* cnt;
    float* kp;
    CK(cudaMalloc(&list, 8 * (n + 2)));
    CK(cudaMalloc(&cnt, 4));
    CK(cudaMalloc(&kp, 12 * k));
    CK(cudaMemcpy(list, h.data(), 8 * n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(cnt, &n, 4, cudaMemcpyHostToDevice));
    auto out = [&](auto run) {
      CK(cudaMemset(kp, 0xFF, 12 * k));
      run();
      CK(cudaDeviceSynchronize());
      std::vector<float> o(3 * k);
      CK(cudaMemcpy(o.data(), kp, 12 * k, cudaMemcpyDeviceToHost));
      return o;
    };
    const auto base =
        out([&] { rank_kernel<0><<<sms, kThreads, kSmem>>>(list, cnt, k, 3840, kp); });
    const auto stag =
        out([&] { rank_kernel<1><<<sms, kThreads, kSmem>>>(list, cnt, k, 3840, kp); });
    const auto vec = out([&] { rank_kernel<9><<<sms, kThreads, kSmem>>>(list, cnt, k, 3840, kp); });
    const auto half =
        out([&] { rank_kernel<0><<<sms / 2, kThreads, kSmem>>>(list, cnt, k, 3840, kp); });
    bool same[5] = {true, true, true, true, true};
    for (int c = 1; c < 5; ++c) {
      const auto o = out([&] {
        switch (c) {
          case 1:
            CK(cudaFuncSetAttribute(rank_kernel<0, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmem)));
            rank_kernel<0, 1><<<sms, kThreads, kSmem>>>(list, cnt, k, 3840, kp);
            break;
          case 2:
            CK(cudaFuncSetAttribute(rank_kernel<0, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmem)));
            rank_kernel<0, 2><<<sms, kThreads, kSmem>>>(list, cnt, k, 3840, kp);
            break;
          case 3:
            CK(cudaFuncSetAttribute(rank_kernel<0, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmem)));
            rank_kernel<0, 3><<<sms, kThreads, kSmem>>>(list, cnt, k, 3840, kp);
            break;
          default:
            CK(cudaFuncSetAttribute(rank_kernel<0, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmem)));
            rank_kernel<0, 4><<<sms, kThreads, kSmem>>>(list, cnt, k, 3840, kp);
        }
      });
      same[c] = o == base;
    }
    printf(
        "n %5u counting: same output %d %d %d %d | base %.2f, predicated %.2f, two acc %.2f, hi "
        "words %.2f, signed %.2f\n",
        n, same[1], same[2], same[3], same[4], time_it<0, 0>(sms, list, cnt, k, kp),
        time_it<0, 1>(sms, list, cnt, k, kp), time_it<0, 2>(sms, list, cnt, k, kp),
        time_it<0, 3>(sms, list, cnt, k, kp), time_it<0, 4>(sms, list, cnt, k, kp));
    printf(
        "n %5u: same output: stagger %d, 16B+stagger %d, half grid %d | us per launch (20 "
        "back-to-back): "
        "base %.2f, stagger %.2f, 16B %.2f, 16B+stagger %.2f, half grid %.2f, quarter grid %.2f, "
        "load+write only %.2f, count+write only %.2f\n",
        n, stag == base, vec == base, half == base, time_it<0>(sms, list, cnt, k, kp),
        time_it<1>(sms, list, cnt, k, kp), time_it<8>(sms, list, cnt, k, kp),
        time_it<9>(sms, list, cnt, k, kp), time_it<0>(sms / 2, list, cnt, k, kp),
        time_it<0>(sms / 4, list, cnt, k, kp), time_it<2>(sms, list, cnt, k, kp),
        time_it<4>(sms, list, cnt, k, kp));
    CK(cudaFree(list));
    CK(cudaFree(cnt));
    CK(cudaFree(kp));
  }
  return 0;
}
