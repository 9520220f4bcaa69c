// matmul: FP32 C (M x N) = A (M x K) B (K x N), row-major, any sizes.
//
// The lesson (Simon Boehm's SGEMM_CUDA walk-through, "How to optimize a CUDA matmul kernel for
// cuBLAS-like performance"): a matmul does 2MNK flops on 4(MK + KN + MN) bytes, so it can be
// compute-bound, but only if every float fetched from a slow level of the memory hierarchy feeds
// many FMAs at a faster one. Each step raises that reuse one level up: coalescing (DRAM/L2
// sectors), shared-memory tiles (global loads), register blocking (shared-memory loads), vector
// loads (instructions), warp tiling and double buffering (latency, barriers). Every kernel sums
// its dot products in k order with FMAs, so the error analysis is the same for all.
//
// Variants:
//   v1_naive       one thread per C element, threadIdx.x along M: the 32 lanes of a warp read 32
//                  different rows of A (32 sectors per load) and store a column of C.
//   v2_coalesced   threadIdx.x along N: B loads and C stores are 128 contiguous bytes per warp,
//                  the A element is one broadcast load.
//   v3_smem_tile   TILE x TILE tiles of A and B staged in shared memory (TILE = blockDim.x =
//                  blockDim.y = 8, 16 or 32): each global float is loaded once per tile and used
//                  TILE times. Bounds-checked tile loads (zero fill), two barriers per tile.
//   v4_reg1d       64x64 block tile, BK = 8, 512 threads, 8 outputs of a column per thread: one
//                  shared B value feeds 8 FMAs (1D register blocking, SGEMM_CUDA kernel 4).
//   v5_reg2d       128x128 block tile, BK = 8, 256 threads, an 8x8 output tile per thread: 16
//                  shared loads feed 64 FMAs (2D register blocking, kernel 5).
//   v6_vec4        v5 with float4 global loads and stores, A stored transposed in shared memory
//                  so the fragments are float4 shared loads too (kernel 6). Tiles fully inside
//                  the matrices take the vector path, edge tiles a guarded scalar one.
//   v7_warptile    warp tiling (kernel 10): 4 warps (128 threads), a 128x128x16 block tile, each
//                  warp a 64x64 tile, each lane 2x4 sub-tiles of 4x4 (8x16 outputs): per k a
//                  lane loads 96 bytes from shared memory for 128 FMAs (v5/v6: 64 for 64), and
//                  a warp's fragment loads are 8 or 4 distinct float4s broadcast to its lanes.
//                  Shared memory double-buffered, the next k-tile prefetched into registers
//                  during the FMAs: one barrier per k-tile. The transposed A store is padded
//                  (rows of BM + 4) against bank conflicts. 255 registers: 2 blocks per SM.
//                  Interior tiles load unguarded float4s. When 128x128 tiles would not fill the
//                  GPU (1024^2 on 132 SMs: 64 blocks), the launcher takes 128x64 or 64x64 tiles.
//   cublas         cublasSgemm (FP32, no TF32): the ceiling.
//
// Bench: kernel-lab bench --lab matmul --sweep-variants --size 4096x4096x4096
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "blas.h"
#include "device.h"
#include "lab_common.cuh"

namespace lab::ops {

struct MatmulParams {
  template <class V>
  void visit(V&) {}  // the problem is the size spec
};

// Everything a kernel needs; pitches in elements. `vec`: every base pointer and pitch is a
// multiple of 16 bytes, so a float4 at a column that is a multiple of 4 is aligned.
struct MatmulProblem {
  const float* a;
  const float* b;
  float* c;
  int m, n, k;
  int lda, ldb, ldc;
  bool vec;
};

// B's random stream starts at this index: A has at most 2^28 elements, so the two never share a
// counter.
constexpr uint64_t MATMUL_B_STREAM = uint64_t(1) << 40;

// Up to this many multiply-adds the CPU loops are the reference (and the error bound's S_ij is
// computed exactly); above, cuBLAS is the reference when there is a GPU.
constexpr double MATMUL_CPU_MAX = double(uint64_t(1) << 31);

// The largest problem: 2^40 multiply-adds (16384x16384x4096, 8192^2x16384). Each dimension may
// be 16384, but 16384^3 would keep v1 busy for ~20 s a run (and a CPU-only reference for hours).
constexpr double MATMUL_MAX_MACS = double(uint64_t(1) << 40);

inline LabSlots matmul_inputs(const std::string& size) {
  const auto d = parse_dims(size, 3, 16384, "MxNxK (C(MxN) = A(MxK) B(KxN))");
  const int m = d[0], n = d[1], k = d[2];
  if (double(m) * double(n) * double(k) > MATMUL_MAX_MACS)
    throw Error(ErrorKind::Usage, "size '" + size +
                                      "': M*N*K must be at most 2^40 multiply-adds "
                                      "(16384x16384x4096, 8192x8192x16384)");
  return {{"input", ImageDesc{k, m, 1, PixelType::F32}}, {"b", ImageDesc{n, k, 1, PixelType::F32}}};
}

inline void matmul_fill(uint64_t seed, std::vector<HostImage>& imgs) {
  for (size_t s = 0; s < imgs.size() && s < 2; ++s) {
    const auto v = imgs[s].view<float>();
    const uint64_t base = s == 0 ? 0 : MATMUL_B_STREAM;
    for (int y = 0; y < v.height; ++y)
      for (int x = 0; x < v.width; ++x)
        v.at(x, y) = uniform_pm1(seed, base + uint64_t(y) * uint64_t(v.width) + uint64_t(x));
  }
}

inline std::vector<ImageDesc> matmul_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  if (in.size() != 2) throw Error(ErrorKind::Data, "matmul: needs two inputs, A and B");
  const ImageDesc a = require_f32_plane("matmul (A)", in[0]);
  const ImageDesc b = require_f32_plane("matmul (B)", in[1]);
  if (a.width != b.height)
    throw Error(ErrorKind::Data, "matmul: A is " + std::to_string(a.height) + "x" +
                                     std::to_string(a.width) + " (MxK) but B is " +
                                     std::to_string(b.height) + "x" + std::to_string(b.width) +
                                     " (KxN): the K differ");
  return {ImageDesc{b.width, a.height, 1, PixelType::F32}};
}

inline double matmul_flops(const std::vector<ImageDesc>& in, const ParamMap&) {
  return 2.0 * double(in[0].height) * double(in[1].width) * double(in[0].width);
}

inline bool matmul_cpu_sized(int m, int n, int k) {
  return double(m) * double(n) * double(k) <= MATMUL_CPU_MAX;
}

// C = A B in double, rounded once: the products of two floats are exact in double and the sum's
// error (K 2^-53 relative) is far below a float ulp, so this is the exact product within 1/2 ulp.
// i-k-j order: the inner loop walks rows of B and of the accumulator (cache-friendly).
inline void matmul_cpu(ImageView<const float> a, ImageView<const float> b, ImageView<float> c) {
  std::vector<double> acc(size_t(c.width));
  for (int i = 0; i < c.height; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int k = 0; k < a.width; ++k) {
      const double aik = a.at(k, i);
      const float* brow = b.row(k);
      for (int j = 0; j < c.width; ++j) acc[size_t(j)] += aik * double(brow[j]);
    }
    for (int j = 0; j < c.width; ++j) c.at(j, i) = float(acc[size_t(j)]);
  }
}

inline void matmul_reference(const StageArgs& s) {
  const ImageDesc& a = s.in[0].desc;
  const int m = a.height, k = a.width, n = s.in[1].desc.width;
  // Above 2^31 multiply-adds the CPU loops take many seconds: cuBLAS (FP32) is the reference
  // then, and the comparison's bound allows for its rounding as well (matmul_compare).
  if (!matmul_cpu_sized(m, n, k) && device_info().present) {
    sgemm_host(s.in[0], s.in[1], s.out[0]);
    return;
  }
  matmul_cpu(s.in[0].view<const float>(), s.in[1].view<const float>(), s.out[0].view<float>());
}

// Each output against its own bound. A K-term dot product summed in any order with FMAs (or
// separate roundings) in float has |c - exact| <= gamma_K S_ij, gamma_K = K u / (1 - K u),
// u = 2^-24, S_ij = sum_k |a_ik| |b_kj| (Higham, Accuracy and Stability of Numerical
// Algorithms, 3.1). The reference is either the exact product rounded once (<= u S_ij away) or
// cuBLAS in float (<= gamma_K S_ij away), so |c - ref| <= 2 gamma_{K+2} S_ij holds for both
// with room for the double arithmetic of the bound itself. Underflow adds at most FLT_MIN per
// operation with flush-to-zero (fast math), 2^-149 without: 2 (K + 2) FLT_MIN in all. Fast math
// changes neither the FMAs nor the additions of these kernels: one bound for both passes.
// S_ij is computed exactly (double loops) up to MATMUL_CPU_MAX multiply-adds; above, it is
// bounded a priori: S_ij <= min(sum_k |a_ik| max_k |b_kj|, max_k |a_ik| sum_k |b_kj|)
// (<= K max|A| max|B|), O(MK + KN) work.
inline DiffStats matmul_compare(const CompareArgs& c) {
  const auto a = (*c.in)[0].view<const float>();
  const auto b = (*c.in)[1].view<const float>();
  const auto got = (*c.got)[0].view<const float>();
  const auto ref = (*c.ref)[0].view<const float>();
  const std::string slot =
      c.out_names && !c.out_names->empty() ? (*c.out_names)[0] : std::string("matmul");
  const int m = a.height, k = a.width, n = b.width;
  const double u = 1.0 / double(1 << 24);
  const double g = 2.0 * double(k + 2) * u / (1.0 - double(k + 2) * u);  // 2 gamma_{K+2}
  const double tiny = 2.0 * double(k + 2) * double(FLT_MIN);
  const bool exact_s = matmul_cpu_sized(m, n, k);

  // The a-priori factors (large sizes): row sums and maxima of |A|, column sums and maxima of |B|.
  std::vector<double> a_sum, a_max, b_sum, b_max;
  if (!exact_s) {
    a_sum.assign(size_t(m), 0.0), a_max.assign(size_t(m), 0.0);
    b_sum.assign(size_t(n), 0.0), b_max.assign(size_t(n), 0.0);
    for (int i = 0; i < m; ++i)
      for (int kk = 0; kk < k; ++kk) {
        const double v = std::abs(double(a.at(kk, i)));
        a_sum[size_t(i)] += v;
        a_max[size_t(i)] = std::max(a_max[size_t(i)], v);
      }
    for (int kk = 0; kk < k; ++kk)
      for (int j = 0; j < n; ++j) {
        const double v = std::abs(double(b.at(j, kk)));
        b_sum[size_t(j)] += v;
        b_max[size_t(j)] = std::max(b_max[size_t(j)], v);
      }
  }

  DiffAccumulator acc;
  std::vector<double> s(static_cast<size_t>(n));
  for (int i = 0; i < m; ++i) {
    if (exact_s) {  // S_ij for row i, in the reference's i-k-j order
      std::fill(s.begin(), s.end(), 0.0);
      for (int kk = 0; kk < k; ++kk) {
        const double aik = std::abs(double(a.at(kk, i)));
        const float* brow = b.row(kk);
        for (int j = 0; j < n; ++j) s[size_t(j)] += aik * std::abs(double(brow[j]));
      }
    } else {
      for (int j = 0; j < n; ++j)
        s[size_t(j)] =
            std::min(a_sum[size_t(i)] * b_max[size_t(j)], a_max[size_t(i)] * b_sum[size_t(j)]);
    }
    for (int j = 0; j < n; ++j)
      acc.add(got.at(j, i), ref.at(j, i), g * s[size_t(j)] + tiny, slot, j, i);
  }
  return acc.finish();
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------

__global__ void matmul_v1_naive_kernel(MatmulProblem p) {
  const int m = blockIdx.x * blockDim.x + threadIdx.x;  // x along M: the classic mistake
  const int n = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= p.m || n >= p.n) return;
  const float* a = p.a + size_t(m) * p.lda;
  const float* b = p.b + n;
  float s = 0.0f;
  for (int k = 0; k < p.k; ++k) s += a[k] * b[size_t(k) * p.ldb];
  p.c[size_t(m) * p.ldc + n] = s;
}

__global__ void matmul_v2_coalesced_kernel(MatmulProblem p) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;  // x along N: B and C rows coalesced
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= p.m || n >= p.n) return;
  const float* a = p.a + size_t(m) * p.lda;
  const float* b = p.b + n;
  float s = 0.0f;
  for (int k = 0; k < p.k; ++k) s += a[k] * b[size_t(k) * p.ldb];
  p.c[size_t(m) * p.ldc + n] = s;
}

template <int TILE>
__global__ void __launch_bounds__(TILE* TILE) matmul_v3_smem_tile_kernel(MatmulProblem p) {
  __shared__ float as[TILE][TILE];  // as[ty][k]: a warp reads one (broadcast) or a few rows
  __shared__ float bs[TILE][TILE];  // bs[k][tx]: a warp reads consecutive banks
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float s = 0.0f;
  for (int k0 = 0; k0 < p.k; k0 += TILE) {
    // Out-of-range elements load as 0: fma(0, x, s) == s, so edge tiles add nothing.
    as[ty][tx] = row < p.m && k0 + tx < p.k ? p.a[size_t(row) * p.lda + k0 + tx] : 0.0f;
    bs[ty][tx] = k0 + ty < p.k && col < p.n ? p.b[size_t(k0 + ty) * p.ldb + col] : 0.0f;
    __syncthreads();  // the tile is complete before anyone reads it
#pragma unroll
    for (int k = 0; k < TILE; ++k) s += as[ty][k] * bs[k][tx];
    __syncthreads();  // everyone is done with it before the next tile overwrites it
  }
  if (row < p.m && col < p.n) p.c[size_t(row) * p.ldc + col] = s;
}

constexpr int V4_BM = 64, V4_BN = 64, V4_BK = 8, V4_TM = 8;
constexpr int V4_THREADS = V4_BM * V4_BN / V4_TM;  // 512

__global__ void __launch_bounds__(V4_THREADS) matmul_v4_reg1d_kernel(MatmulProblem p) {
  __shared__ float as[V4_BM * V4_BK];  // [m][k]
  __shared__ float bs[V4_BK * V4_BN];  // [k][n]
  const int m0 = blockIdx.y * V4_BM, n0 = blockIdx.x * V4_BN;
  const int tid = threadIdx.x;
  // Outputs: column tcol, rows trow * 8 .. + 7. A warp shares trow: the A reads broadcast.
  const int tcol = tid % V4_BN, trow = tid / V4_BN;
  const int ar = tid / V4_BK, ac = tid % V4_BK;  // this thread's element of the 64x8 A tile
  const int br = tid / V4_BN, bc = tid % V4_BN;  // and of the 8x64 B tile
  float acc[V4_TM] = {};
  for (int k0 = 0; k0 < p.k; k0 += V4_BK) {
    as[ar * V4_BK + ac] =
        m0 + ar < p.m && k0 + ac < p.k ? p.a[size_t(m0 + ar) * p.lda + k0 + ac] : 0.0f;
    bs[br * V4_BN + bc] =
        k0 + br < p.k && n0 + bc < p.n ? p.b[size_t(k0 + br) * p.ldb + n0 + bc] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < V4_BK; ++k) {
      const float bv = bs[k * V4_BN + tcol];  // one shared load, 8 FMAs
#pragma unroll
      for (int i = 0; i < V4_TM; ++i) acc[i] += as[(trow * V4_TM + i) * V4_BK + k] * bv;
    }
    __syncthreads();
  }
  const int n = n0 + tcol;
  if (n >= p.n) return;
#pragma unroll
  for (int i = 0; i < V4_TM; ++i) {
    const int m = m0 + trow * V4_TM + i;
    if (m < p.m) p.c[size_t(m) * p.ldc + n] = acc[i];
  }
}

// v5 and v6: 128x128 block tile, BK = 8, 8x8 outputs per thread, 256 threads.
constexpr int V5_BM = 128, V5_BN = 128, V5_BK = 8, V5_TM = 8, V5_TN = 8;
constexpr int V5_THREADS = V5_BM * V5_BN / (V5_TM * V5_TN);  // 256

__global__ void __launch_bounds__(V5_THREADS) matmul_v5_reg2d_kernel(MatmulProblem p) {
  __shared__ float as[V5_BM * V5_BK];  // [m][k]
  __shared__ float bs[V5_BK * V5_BN];  // [k][n]
  const int m0 = blockIdx.y * V5_BM, n0 = blockIdx.x * V5_BN;
  const int tid = threadIdx.x;
  const int tcol = tid % (V5_BN / V5_TN), trow = tid / (V5_BN / V5_TN);  // 16 x 16 threads
  const int ar = tid / V5_BK, ac = tid % V5_BK;  // rows ar + 32 s of the A tile
  const int br = tid / V5_BN, bc = tid % V5_BN;  // rows br + 2 s of the B tile
  constexpr int A_STRIDE = V5_THREADS / V5_BK, B_STRIDE = V5_THREADS / V5_BN;
  float acc[V5_TM][V5_TN] = {};
  float rm[V5_TM], rn[V5_TN];
  for (int k0 = 0; k0 < p.k; k0 += V5_BK) {
#pragma unroll
    for (int r = 0; r < V5_BM; r += A_STRIDE) {
      const int m = m0 + ar + r, k = k0 + ac;
      as[(ar + r) * V5_BK + ac] = m < p.m && k < p.k ? p.a[size_t(m) * p.lda + k] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < V5_BK; r += B_STRIDE) {
      const int k = k0 + br + r, n = n0 + bc;
      bs[(br + r) * V5_BN + bc] = k < p.k && n < p.n ? p.b[size_t(k) * p.ldb + n] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < V5_BK; ++k) {
#pragma unroll
      for (int i = 0; i < V5_TM; ++i) rm[i] = as[(trow * V5_TM + i) * V5_BK + k];
#pragma unroll
      for (int j = 0; j < V5_TN; ++j) rn[j] = bs[k * V5_BN + tcol * V5_TN + j];
#pragma unroll
      for (int i = 0; i < V5_TM; ++i)
#pragma unroll
        for (int j = 0; j < V5_TN; ++j) acc[i][j] += rm[i] * rn[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < V5_TM; ++i) {
    const int m = m0 + trow * V5_TM + i;
    if (m >= p.m) break;
#pragma unroll
    for (int j = 0; j < V5_TN; ++j) {
      const int n = n0 + tcol * V5_TN + j;
      if (n < p.n) p.c[size_t(m) * p.ldc + n] = acc[i][j];
    }
  }
}

// Four consecutive floats of row r, columns c .. c + 3 (c a multiple of 4), zero where outside
// rows x cols: one float4 load when all four are inside and aligned, else scalar loads.
__device__ __forceinline__ float4 load4_guarded(const float* base, int ld, int r, int c, int rows,
                                                int cols, bool vec) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (r >= rows) return v;
  const float* q = base + size_t(r) * ld;
  if (vec && c + 3 < cols) return __ldg(reinterpret_cast<const float4*>(q + c));
  if (c < cols) v.x = __ldg(q + c);
  if (c + 1 < cols) v.y = __ldg(q + c + 1);
  if (c + 2 < cols) v.z = __ldg(q + c + 2);
  if (c + 3 < cols) v.w = __ldg(q + c + 3);
  return v;
}

// Stores four consecutive outputs of row r from column c (a multiple of 4), each if inside.
__device__ __forceinline__ void store4_guarded(const MatmulProblem& p, int r, int c, float4 v) {
  if (r >= p.m) return;
  float* q = p.c + size_t(r) * p.ldc + c;
  if (p.vec && c + 3 < p.n) {
    *reinterpret_cast<float4*>(q) = v;
    return;
  }
  if (c < p.n) q[0] = v.x;
  if (c + 1 < p.n) q[1] = v.y;
  if (c + 2 < p.n) q[2] = v.z;
  if (c + 3 < p.n) q[3] = v.w;
}

__global__ void __launch_bounds__(V5_THREADS) matmul_v6_vec4_kernel(MatmulProblem p) {
  __shared__ __align__(16) float as[V5_BK * V5_BM];  // transposed: [k][m]
  __shared__ __align__(16) float bs[V5_BK * V5_BN];  // [k][n]
  const int m0 = blockIdx.y * V5_BM, n0 = blockIdx.x * V5_BN;
  const int tid = threadIdx.x;
  const int tcol = tid % (V5_BN / V5_TN), trow = tid / (V5_BN / V5_TN);
  const int ar = tid / (V5_BK / 4), ac = (tid % (V5_BK / 4)) * 4;  // one float4 of A's tile
  const int br = tid / (V5_BN / 4), bc = (tid % (V5_BN / 4)) * 4;  // one float4 of B's tile
  float acc[V5_TM][V5_TN] = {};
  float rm[V5_TM], rn[V5_TN];
  for (int k0 = 0; k0 < p.k; k0 += V5_BK) {
    // Tiles entirely inside the matrices: one unguarded 16-byte load each (uniform branch).
    float4 av, bv;
    if (p.vec && m0 + V5_BM <= p.m && k0 + V5_BK <= p.k)
      av = __ldg(reinterpret_cast<const float4*>(p.a + size_t(m0 + ar) * p.lda + k0 + ac));
    else
      av = load4_guarded(p.a, p.lda, m0 + ar, k0 + ac, p.m, p.k, p.vec);
    if (p.vec && k0 + V5_BK <= p.k && n0 + V5_BN <= p.n)
      bv = __ldg(reinterpret_cast<const float4*>(p.b + size_t(k0 + br) * p.ldb + n0 + bc));
    else
      bv = load4_guarded(p.b, p.ldb, k0 + br, n0 + bc, p.k, p.n, p.vec);
    // A transposed on the way in, so that a thread's 8 rows at one k are 2 float4 loads.
    as[(ac + 0) * V5_BM + ar] = av.x;
    as[(ac + 1) * V5_BM + ar] = av.y;
    as[(ac + 2) * V5_BM + ar] = av.z;
    as[(ac + 3) * V5_BM + ar] = av.w;
    *reinterpret_cast<float4*>(&bs[br * V5_BN + bc]) = bv;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < V5_BK; ++k) {
#pragma unroll
      for (int i = 0; i < V5_TM; i += 4) {
        const float4 t = *reinterpret_cast<const float4*>(&as[k * V5_BM + trow * V5_TM + i]);
        rm[i] = t.x, rm[i + 1] = t.y, rm[i + 2] = t.z, rm[i + 3] = t.w;
      }
#pragma unroll
      for (int j = 0; j < V5_TN; j += 4) {
        const float4 t = *reinterpret_cast<const float4*>(&bs[k * V5_BN + tcol * V5_TN + j]);
        rn[j] = t.x, rn[j + 1] = t.y, rn[j + 2] = t.z, rn[j + 3] = t.w;
      }
#pragma unroll
      for (int i = 0; i < V5_TM; ++i)
#pragma unroll
        for (int j = 0; j < V5_TN; ++j) acc[i][j] += rm[i] * rn[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < V5_TM; ++i)
#pragma unroll
    for (int j = 0; j < V5_TN; j += 4)
      store4_guarded(p, m0 + trow * V5_TM + i, n0 + tcol * V5_TN + j,
                     make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}

// v7: warp tiling. A block of THREADS computes a BM x BN tile; warp w a WM x WN tile of it; its
// lanes form an 8 x 4 grid, each lane a 4x4 output sub-tile repeated WM / 32 x WN / 16 times
// (rows wm + 32 i + tm + r, columns wn + 16 j + tn + c). A warp's fragment load at one k then
// reads 8 (A) or 4 (B) distinct float4s, broadcast to the lanes.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int THREADS_>
struct WarpTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, THREADS = THREADS_;
  static constexpr int TM = WM / 8, TN = WN / 4;  // outputs per lane: TM x TN
  static constexpr int MI = TM / 4, NI = TN / 4;  // 4x4 sub-tiles per lane
  static constexpr int WARPS_N = BN / WN;
  static constexpr int AS_LD = BM + 4;  // padded transposed-A row (see the store)
  // A: THREADS / 2 rows per pass, two float4s of a row's 8-column group per thread pair.
  static constexpr int A_ROWS = THREADS / 2, A_PASSES = BM / A_ROWS;
  static constexpr int A_LOADS = A_PASSES * (BK / 8);
  // B: BN / 4 threads per row, THREADS / (BN / 4) rows per pass.
  static constexpr int B_ROWS = THREADS / (BN / 4);
  static constexpr int B_LOADS = BK / B_ROWS;
  static_assert((BM / WM) * (BN / WN) * 32 == THREADS, "one warp per warp tile");
  static_assert(WM % 32 == 0 && WN % 16 == 0 && BK % 8 == 0, "tile shapes");
  static_assert(BM % A_ROWS == 0 && THREADS % (BN / 4) == 0 && BK % B_ROWS == 0, "load passes");
  static_assert(AS_LD * 4 % 32 == 16, "k and k + 4 of a transposed-A store 16 banks apart");
};

// This thread's share of the k-tile at k0 into registers. A: float4 q of row m0 + tid / 2 +
// A_ROWS (q % A_PASSES), columns k0 + 4 (tid % 2) + 8 (q / A_PASSES). B: float4 q of row
// k0 + tid / (BN / 4) + B_ROWS q, columns n0 + 4 (tid % (BN / 4)). `full`: the tile is inside both
// matrices and 16-byte aligned: unguarded float4 loads.
template <class T>
__device__ __forceinline__ void v7_load(const MatmulProblem& p, int m0, int n0, int k0, bool full,
                                        float4 (&ra)[T::A_LOADS], float4 (&rb)[T::B_LOADS]) {
  const int tid = threadIdx.x;
  const int am = m0 + (tid >> 1), ak = k0 + (tid & 1) * 4;
  const int bk = k0 + tid / (T::BN / 4), bn = n0 + (tid % (T::BN / 4)) * 4;
  if (full) {
    const float* pa = p.a + size_t(am) * p.lda + ak;
    const float* pb = p.b + size_t(bk) * p.ldb + bn;
#pragma unroll
    for (int q = 0; q < T::A_LOADS; ++q)
      ra[q] = __ldg(reinterpret_cast<const float4*>(
          pa + size_t(T::A_ROWS * (q % T::A_PASSES)) * p.lda + 8 * (q / T::A_PASSES)));
#pragma unroll
    for (int q = 0; q < T::B_LOADS; ++q)
      rb[q] = __ldg(reinterpret_cast<const float4*>(pb + size_t(T::B_ROWS * q) * p.ldb));
  } else {
#pragma unroll
    for (int q = 0; q < T::A_LOADS; ++q)
      ra[q] = load4_guarded(p.a, p.lda, am + T::A_ROWS * (q % T::A_PASSES),
                            ak + 8 * (q / T::A_PASSES), p.m, p.k, p.vec);
#pragma unroll
    for (int q = 0; q < T::B_LOADS; ++q)
      rb[q] = load4_guarded(p.b, p.ldb, bk + T::B_ROWS * q, bn, p.k, p.n, p.vec);
  }
}

// Registers -> shared memory. A goes in transposed (as[k][m]): in one store instruction a warp
// writes 16 consecutive m at two k four apart; with rows of BM + 4 floats those two k land 16
// banks apart, so the 32 stores hit 32 different banks.
template <class T>
__device__ __forceinline__ void v7_store(float (*as)[T::AS_LD], float (*bs)[T::BN],
                                         const float4 (&ra)[T::A_LOADS],
                                         const float4 (&rb)[T::B_LOADS]) {
  const int tid = threadIdx.x;
  const int am = tid >> 1, ak = (tid & 1) * 4;
  const int bk = tid / (T::BN / 4), bn = (tid % (T::BN / 4)) * 4;
#pragma unroll
  for (int q = 0; q < T::A_LOADS; ++q) {
    const int m = am + T::A_ROWS * (q % T::A_PASSES), k = ak + 8 * (q / T::A_PASSES);
    as[k + 0][m] = ra[q].x;
    as[k + 1][m] = ra[q].y;
    as[k + 2][m] = ra[q].z;
    as[k + 3][m] = ra[q].w;
  }
#pragma unroll
  for (int q = 0; q < T::B_LOADS; ++q)
    *reinterpret_cast<float4*>(&bs[bk + T::B_ROWS * q][bn]) = rb[q];
}

template <class T, int MIN_BLOCKS>
__global__ void __launch_bounds__(T::THREADS, MIN_BLOCKS)
    matmul_v7_warptile_kernel(MatmulProblem p) {
  __shared__ __align__(16) float as[2][T::BK][T::AS_LD];  // transposed A, double-buffered
  __shared__ __align__(16) float bs[2][T::BK][T::BN];
  const int m0 = blockIdx.y * T::BM, n0 = blockIdx.x * T::BN;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = (warp / T::WARPS_N) * T::WM, wn = (warp % T::WARPS_N) * T::WN;
  const int tm = (lane >> 2) * 4, tn = (lane & 3) * 4;
  const bool interior = p.vec && m0 + T::BM <= p.m && n0 + T::BN <= p.n;
  float acc[T::TM][T::TN];
#pragma unroll
  for (int i = 0; i < T::TM; ++i)
#pragma unroll
    for (int j = 0; j < T::TN; ++j) acc[i][j] = 0.0f;

  float4 ra[T::A_LOADS], rb[T::B_LOADS];
  const int tiles = (p.k + T::BK - 1) / T::BK;
  v7_load<T>(p, m0, n0, 0, interior && T::BK <= p.k, ra, rb);
  v7_store<T>(as[0], bs[0], ra, rb);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int cur = t & 1;
    const bool more = t + 1 < tiles;
    if (more) {  // the next k-tile's global loads are in flight during this tile's FMAs
      const int k0 = (t + 1) * T::BK;
      v7_load<T>(p, m0, n0, k0, interior && k0 + T::BK <= p.k, ra, rb);
    }
#pragma unroll
    for (int k = 0; k < T::BK; ++k) {
      float a[T::TM], b[T::TN];
#pragma unroll
      for (int i = 0; i < T::MI; ++i) {
        const float4 v = *reinterpret_cast<const float4*>(&as[cur][k][wm + 32 * i + tm]);
        a[4 * i] = v.x, a[4 * i + 1] = v.y, a[4 * i + 2] = v.z, a[4 * i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < T::NI; ++j) {
        const float4 v = *reinterpret_cast<const float4*>(&bs[cur][k][wn + 16 * j + tn]);
        b[4 * j] = v.x, b[4 * j + 1] = v.y, b[4 * j + 2] = v.z, b[4 * j + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < T::TM; ++i)
#pragma unroll
        for (int j = 0; j < T::TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    // The other buffer was last read in iteration t - 1, which every thread has left (barrier).
    if (more) v7_store<T>(as[cur ^ 1], bs[cur ^ 1], ra, rb);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < T::TM; ++i) {
    const int row = m0 + wm + 32 * (i / 4) + tm + i % 4;
#pragma unroll
    for (int j = 0; j < T::NI; ++j) {
      const int col = n0 + wn + 16 * j + tn;
      const float4 v =
          make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
      if (interior)
        *reinterpret_cast<float4*>(p.c + size_t(row) * p.ldc + col) = v;
      else
        store4_guarded(p, row, col, v);
    }
  }
}

// Three tile shapes, all four warps (128 threads): the 128x128 tile (64x64 per warp, 8x16 outputs
// per lane: 96 bytes of shared-memory loads per 128 FMAs) is the fast one, but at 1024^3 it makes
// only 64 blocks for 132 SMs; the launcher then takes a smaller tile (launch_v7). Measured on an
// H200 at 4096^3 (cuBLAS 49.6 TFLOP/s): 128x128 46.2, 128x64 36.9, 64x64 33.3; 256 threads with
// 64x32 warp tiles and at most 128 registers (2 blocks per SM) reached 42.
using V7Big = WarpTile<128, 128, 16, 64, 64, 128>;  // 255 registers: 2 blocks per SM
using V7Mid = WarpTile<128, 64, 16, 64, 32, 128>;   // 8x8 per lane, 3 blocks per SM
using V7Small = WarpTile<64, 64, 16, 32, 32, 128>;  // 4x8 per lane, 4 blocks per SM
constexpr int V7_THREADS = 128;
static_assert(V7Big::THREADS == V7_THREADS && V7Mid::THREADS == V7_THREADS &&
                  V7Small::THREADS == V7_THREADS,
              "one block shape for the variant");

// ---- launchers -------------------------------------------------------------------------------

static MatmulProblem problem_of(const StageArgs& s) {
  const ImageRef &a = s.in[0], &b = s.in[1], &c = s.out[0];
  for (const ImageRef* r : {&a, &b, &c})
    if (r->pitch % sizeof(float) != 0)
      throw Error(ErrorKind::Data, "matmul: a row pitch of " + std::to_string(r->pitch) +
                                       " bytes is not a whole number of floats");
  auto aligned16 = [](const ImageRef& r) {
    return reinterpret_cast<uintptr_t>(r.data) % 16 == 0 && r.pitch % 16 == 0;
  };
  MatmulProblem p;
  p.a = static_cast<const float*>(a.data);
  p.b = static_cast<const float*>(b.data);
  p.c = static_cast<float*>(c.data);
  p.m = a.desc.height, p.k = a.desc.width, p.n = b.desc.width;
  p.lda = int(a.pitch / sizeof(float));
  p.ldb = int(b.pitch / sizeof(float));
  p.ldc = int(c.pitch / sizeof(float));
  p.vec = aligned16(a) && aligned16(b) && aligned16(c);
  return p;
}

static dim3 tiles_grid(const MatmulProblem& p, int bm, int bn) {
  return dim3(unsigned((p.n + bn - 1) / bn), unsigned((p.m + bm - 1) / bm));
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const MatmulProblem p = problem_of(a);
  launch(ctx, "matmul_v1_naive", matmul_v1_naive_kernel, grid_2d(p.m, p.n, a.block),
         dim3(a.block.x, a.block.y), 0, p);
}

static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  const MatmulProblem p = problem_of(a);
  launch(ctx, "matmul_v2_coalesced", matmul_v2_coalesced_kernel, grid_2d(p.n, p.m, a.block),
         dim3(a.block.x, a.block.y), 0, p);
}

template <int TILE>
static void launch_v3_tile(LaunchContext& ctx, const MatmulProblem& p) {
  static const std::string name = "matmul_v3_smem_tile<" + std::to_string(TILE) + ">";
  launch(ctx, name.c_str(), matmul_v3_smem_tile_kernel<TILE>, tiles_grid(p, TILE, TILE),
         dim3(TILE, TILE), 0, p);
}

// TILE is a template parameter (static shared arrays, an unrolled inner loop): the block is
// TILE x TILE, and these instances are the variant's allowed blocks.
using V3Tiles = BlockInstances<B<8, 8>, B<16, 16>, B<32, 32>>;
static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  const MatmulProblem p = problem_of(a);
  V3Tiles::dispatch(a.block, "matmul v3_smem_tile",
                    [&](auto x, auto) { launch_v3_tile<decltype(x)::value>(ctx, p); });
}

// The register-blocked kernels have a fixed thread count (it is their tile divided by the
// outputs per thread); the block list holds exactly that.
static void launch_v4(LaunchContext& ctx, const StageArgs& a) {
  const MatmulProblem p = problem_of(a);
  launch(ctx, "matmul_v4_reg1d", matmul_v4_reg1d_kernel, tiles_grid(p, V4_BM, V4_BN),
         dim3(V4_THREADS), 0, p);
}

static void launch_v5(LaunchContext& ctx, const StageArgs& a) {
  const MatmulProblem p = problem_of(a);
  launch(ctx, "matmul_v5_reg2d", matmul_v5_reg2d_kernel, tiles_grid(p, V5_BM, V5_BN),
         dim3(V5_THREADS), 0, p);
}

static void launch_v6(LaunchContext& ctx, const StageArgs& a) {
  const MatmulProblem p = problem_of(a);
  launch(ctx, "matmul_v6_vec4", matmul_v6_vec4_kernel, tiles_grid(p, V5_BM, V5_BN),
         dim3(V5_THREADS), 0, p);
}

template <class T, int MIN_BLOCKS>
static void launch_v7_tile(LaunchContext& ctx, const MatmulProblem& p, const char* name) {
  launch(ctx, name, matmul_v7_warptile_kernel<T, MIN_BLOCKS>, tiles_grid(p, T::BM, T::BN),
         dim3(T::THREADS), 0, p);
}

// The tile is chosen from the grid it makes, as cuBLAS's heuristics do: the 128x128 tile when
// it gives at least 1.5 blocks per SM (H200: from 2048^2 up; measured 46 TFLOP/s at 4096^3),
// else 128x64 when that gives about one block per SM (1024^2: 32 against 13 TFLOP/s for
// 128x128), else 64x64 (small matrices).
static void launch_v7(LaunchContext& ctx, const StageArgs& a) {
  const MatmulProblem p = problem_of(a);
  const long long sms = std::max(1, device_info().sms);
  auto blocks = [&](int bm, int bn) {
    return (long long)((p.m + bm - 1) / bm) * (long long)((p.n + bn - 1) / bn);
  };
  if (2 * blocks(V7Big::BM, V7Big::BN) >= 3 * sms)
    return launch_v7_tile<V7Big, 2>(ctx, p, "matmul_v7_warptile<128x128>");
  if (10 * blocks(V7Mid::BM, V7Mid::BN) >= 9 * sms)
    return launch_v7_tile<V7Mid, 3>(ctx, p, "matmul_v7_warptile<128x64>");
  launch_v7_tile<V7Small, 4>(ctx, p, "matmul_v7_warptile<64x64>");
}

static void launch_cublas(LaunchContext& ctx, const StageArgs& a) {
  const ImageRef &A = a.in[0], &B = a.in[1], &C = a.out[0];
  library_call(ctx, "cublas_sgemm", [&] {
    // Row-major pitches in elements: the leading dimensions cuBLAS takes.
    sgemm_rowmajor(ctx.stream(), A.desc.height, B.desc.width, A.desc.width,
                   static_cast<const float*>(A.data), A.pitch / sizeof(float),
                   static_cast<const float*>(B.data), B.pitch / sizeof(float),
                   static_cast<float*>(C.data), C.pitch / sizeof(float));
    return cudaGetLastError();
  });
}

// ---- variant table ---------------------------------------------------------------------------

OpDef matmul_op(const OpLookup&) {
  const std::vector<Block> any = {{32, 8}, {16, 16}, {32, 32}, {8, 32}, {64, 4}};
  OpDef op;
  op.name = "matmul";
  op.summary = "FP32 C (MxN) = A (MxK) B (KxN), row-major: from a naive kernel to cuBLAS";
  op.inputs = {"input", "b"};
  op.outputs = {"matmul"};
  op.params = param_specs<MatmulParams>();
  op.shape = matmul_shape;
  op.reference = matmul_reference;
  op.compare = matmul_compare;
  op.tol_precise = {0, 0};  // unused: matmul_compare gives each element its own bound
  op.tol_fast = {0, 0};
  op.tol_why =
      "per element |c - ref| <= 2 gamma_{K+2} S_ij + 2 (K+2) FLT_MIN, S_ij = sum_k |a_ik||b_kj|, "
      "gamma_n = n u / (1 - n u), u = 2^-24: a float dot product in any order has error <= "
      "gamma_K S_ij (Higham 3.1); the reference is the exact product rounded once (CPU, double "
      "sums) or, above 2^31 multiply-adds with a GPU, cuBLAS FP32 (<= gamma_K S_ij itself), "
      "hence the 2; the FLT_MIN term covers underflow (flush-to-zero in fast math). S_ij is "
      "exact up to 2^31 multiply-adds, above that bounded by min(sum|a_i.| max|b_.j|, max|a_i.| "
      "sum|b_.j|). Fast math changes no FMA or add here: the same bound";
  op.lab_inputs = matmul_inputs;
  op.lab_fill = matmul_fill;
  op.lab_size_help =
      "MxNxK: C (MxN) = A (MxK) B (KxN), each 1 to 16384, M*N*K at most 2^40; A and B uniform "
      "in [-1, 1)";
  op.lab_default_size = "1024x1024x1024";
  op.story =
      "A matmul does 2MNK flops on 4(MK + KN + MN) bytes: at 4096^3 that is 680 flops per byte, "
      "far more than the GPU's ratio of compute to DRAM bandwidth, so it can run at the FP32 "
      "peak, but only if each float fetched from a slow memory feeds many FMAs from a fast one. "
      "The naive kernel reads 2K floats per output from global memory (and its warps read A "
      "across 32 rows); coalescing fixes the access pattern, shared-memory tiles cut global "
      "loads by the tile width, register blocking cuts shared-memory loads by the outputs per "
      "thread, float4 loads cut instructions, and warp tiling with double buffering keeps the "
      "FMA pipes busy across the barriers. cuBLAS is the ceiling: compare each step's TFLOP/s "
      "with it. The viewport draws the output tile each block computed (from the grid of the "
      "launch that ran; hover a tile): the steps are mostly about that tile, since a block that "
      "computes a BM x BN tile reads BM rows of A and BN columns of B once for BM x BN outputs, "
      "so the bigger the tile, the fewer bytes per FMA. The values themselves are random inputs' "
      "sums: noise, hence the tiles.";
  op.flops = matmul_flops;
  // clang-format off
  op.default_variant = "v7_warptile";
  op.variants = {
      {"v1_naive", "one thread per output, threadIdx.x along M: warps read A across 32 rows",
       any, {32, 8}, launch_v1, nullptr},
      {"v2_coalesced", "threadIdx.x along N: B loads and C stores coalesced, A broadcast",
       any, {32, 8}, launch_v2, nullptr},
      {"v3_smem_tile", "TILE x TILE tiles of A and B in shared memory: each load used TILE times",
       V3Tiles::blocks(), {32, 32}, launch_v3, nullptr},
      {"v4_reg1d", "64x64x8 tiles, 8 outputs per thread: one shared B load feeds 8 FMAs",
       {{V4_THREADS, 1}}, {V4_THREADS, 1}, launch_v4, nullptr},
      {"v5_reg2d", "128x128x8 tiles, 8x8 outputs per thread: 16 shared loads feed 64 FMAs",
       {{V5_THREADS, 1}}, {V5_THREADS, 1}, launch_v5, nullptr},
      {"v6_vec4", "float4 global loads and stores, A transposed in shared memory: float4 "
       "fragment loads", {{V5_THREADS, 1}}, {V5_THREADS, 1}, launch_v6, nullptr},
      {"v7_warptile", "64x64 warp tiles, 8x16 outputs a lane, shared memory double-buffered "
       "from a register prefetch", {{V7_THREADS, 1}},
       {V7_THREADS, 1}, launch_v7, nullptr},
      {"cublas", "cublasSgemm, FP32 (no TF32): the ceiling",
       {{1, 1}}, {1, 1}, launch_cublas, nullptr},
  };
  // clang-format on
  // Measured on an H200 (TFLOP/s at 4096^3 / 1024^3, default blocks): v1 0.5 / 0.5, v2 5.9 / 6.3,
  // v3 8.1 / 8.2, v4 15.4 / 17.0, v5 30.2 / 11.8, v6 35.0 / 14.5, v7 46.2 / 30.2, cuBLAS 49.6 /
  // 29-34.
  op.variants[0].expect =
      "Very slow (~0.5 TFLOP/s on an H200): a warp's A load touches 32 rows, 32 sectors for 4 "
      "useful bytes each, and its C store 32 rows. The block shape matters: 8x32 is ~3.5x faster "
      "than 32x8, since a warp then spans 8 rows of A, not 32.";
  op.variants[1].expect =
      "~10x v1: B loads and C stores are 128 contiguous bytes per warp, A is a broadcast. Now "
      "bound by cache traffic: two loads (from L1/L2) per FMA.";
  op.variants[2].expect =
      "Faster than v2, best with 32x32 (~8 TFLOP/s): global loads drop TILE-fold, but each FMA "
      "still needs two shared-memory loads, and the barriers stall the block.";
  op.variants[3].expect =
      "About 2x v3: one shared load of B feeds 8 FMAs and the A loads are broadcasts, so "
      "shared-memory traffic per FMA drops ~4x.";
  op.variants[4].expect =
      "About 2x v4 at 4096^3 (64 FMAs per 16 shared loads); the scalar fragment loads and their "
      "bank conflicts limit it. At 1024^3 slower than v4: 128x128 tiles make only 64 blocks, "
      "fewer than the H200's 132 SMs.";
  op.variants[5].expect =
      "~15% over v5: float4 loads cut load instructions 4x; the transposed A store keeps a 2-way "
      "bank conflict. Same 64-block problem at 1024^3.";
  op.variants[6].expect =
      "Over 90% of cuBLAS at 4096^3 (46 of 50 TFLOP/s on an H200): 0.75 shared-memory bytes per "
      "FMA instead of 1, loads hidden behind the FMAs, no bank conflicts. At 1024^3 the smaller "
      "tile keeps every SM busy: close to cuBLAS there too.";
  op.variants[7].ceiling = true;
  op.variants[7].expect =
      "The ceiling: NVIDIA's tuned FP32 SGEMM (no tensor cores, no TF32); ~50 TFLOP/s at 4096^3 "
      "on an H200, ~75% of the FP32 FMA peak.";
  op.variants[0].grid_x_over_rows = true;  // threadIdx.x along M: its grid.x runs down C
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
