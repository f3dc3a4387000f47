#include "hal/drivers/host/kernels/small_gemm.h"

#include <algorithm>
#include <cstring>

// One build serves any x86-64 machine: the column function is compiled for
// AVX-512, AVX2 and baseline x86-64, picked once at load time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OPENNEURON_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OPENNEURON_SIMD_CLONES
#endif
#define OPENNEURON_INLINE [[gnu::always_inline]] inline

namespace openneuron::hal::host {
namespace {

constexpr int kLanes = 16;
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

OPENNEURON_INLINE Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The first `count` floats of p, zero beyond: tails take the same arithmetic
// as full vectors (adding zero products leaves a sum unchanged).
OPENNEURON_INLINE Vec load_partial(const float* p, int64_t count) {
  Vec v = {};
  for (int64_t i = 0; i < count; ++i) v[i] = p[i];
  return v;
}

// Lanes summed in a fixed pairwise order.
OPENNEURON_INLINE float horizontal_sum(Vec v) {
  float t[kLanes];
  std::memcpy(t, &v, sizeof(v));
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) t[i] += t[i + width];
  return t[0];
}

OPENNEURON_INLINE float finish(const SmallGemmF32& g, float sum, int64_t m, int64_t n) {
  float r = g.alpha == 1.0f ? sum : g.alpha * sum;
  if (g.beta != 0.0f)
    r += g.beta * g.bias[m * g.bias_m_stride + n * g.bias_n_stride];
  return r;
}

// B read as rows of B^T (b_k_stride == 1): each output is a dot product
// along k. R output columns share the loads of A; U accumulators per output
// keep enough independent multiply-adds in flight. The k tail (fewer than
// U vectors) goes to the accumulators in order, zero padded; A's padded tail
// is built once per range.
template <int M, int U>
struct DotTail {
  int64_t k_main = 0;  // k where the tail starts
  Vec a[M][U] = {};
};

template <int M, int R, int U>
OPENNEURON_INLINE void dot_columns(const SmallGemmF32& g, const DotTail<M, U>& tail, int64_t n) {
  const int64_t K = g.k;
  const float* b[R];
  for (int r = 0; r < R; ++r) b[r] = g.b + (n + r) * g.b_n_stride;
  Vec acc[R][M][U] = {};
  // Rows of B^T cross a 4 KiB page every few columns, where the hardware
  // prefetcher stops: fetch the rows two column groups ahead meanwhile.
  const int64_t ahead = 2 * R * g.b_n_stride;
  for (int64_t k = 0; k < tail.k_main; k += kLanes * U) {
    for (int u = 0; u < U; ++u) {
      for (int r = 0; r < R; ++r) __builtin_prefetch(b[r] + k + u * kLanes + ahead);
      Vec a[M];
      for (int m = 0; m < M; ++m) a[m] = load(g.a + m * g.a_row_stride + k + u * kLanes);
      for (int r = 0; r < R; ++r) {
        const Vec bv = load(b[r] + k + u * kLanes);
        for (int m = 0; m < M; ++m) acc[r][m][u] += a[m] * bv;
      }
    }
  }
  for (int u = 0; u < U && tail.k_main + u * kLanes < K; ++u) {
    const int64_t k = tail.k_main + u * kLanes;
    for (int r = 0; r < R; ++r) {
      const Vec bv = load_partial(b[r] + k, std::min<int64_t>(kLanes, K - k));
      for (int m = 0; m < M; ++m) acc[r][m][u] += tail.a[m][u] * bv;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) {
      Vec s = acc[r][m][0];
      for (int u = 1; u < U; ++u) s += acc[r][m][u];
      g.c[m * g.c_row_stride + n + r] = finish(g, horizontal_sum(s), m, n + r);
    }
}

template <int M, int R, int U>
OPENNEURON_INLINE void dot_product_range(const SmallGemmF32& g, int64_t n0, int64_t n1) {
  DotTail<M, U> tail;
  tail.k_main = g.k / (kLanes * U) * (kLanes * U);
  for (int u = 0; u < U && tail.k_main + u * kLanes < g.k; ++u) {
    const int64_t k = tail.k_main + u * kLanes;
    for (int m = 0; m < M; ++m)
      tail.a[m][u] = load_partial(g.a + m * g.a_row_stride + k, std::min<int64_t>(kLanes, g.k - k));
  }
  int64_t n = n0;
  for (; n + R <= n1; n += R) dot_columns<M, R, U>(g, tail, n);
  for (; n < n1; ++n) dot_columns<M, 1, U>(g, tail, n);
}

// B read by rows (b_n_stride == 1): a block of V vectors of output columns
// stays in registers while k runs; each output sums its products in k order.
template <int M, int V>
OPENNEURON_INLINE void row_block(const SmallGemmF32& g, int64_t n, int64_t width) {
  constexpr int64_t kWidth = V * kLanes;
  Vec acc[M][V] = {};
  for (int64_t k = 0; k < g.k; ++k) {
    const float* brow = g.b + k * g.b_k_stride + n;
    Vec bv[V];
    for (int v = 0; v < V; ++v)
      bv[v] = width == kWidth ? load(brow + v * kLanes)
                              : load_partial(brow + v * kLanes,
                                             std::clamp<int64_t>(width - v * kLanes, 0, kLanes));
    for (int m = 0; m < M; ++m) {
      const float x = g.a[m * g.a_row_stride + k];
      const Vec a = Vec{} + x;  // x in every lane
      for (int v = 0; v < V; ++v) acc[m][v] += a * bv[v];
    }
  }
  for (int m = 0; m < M; ++m) {
    float out[kWidth];
    std::memcpy(out, acc[m], sizeof(out));
    for (int64_t j = 0; j < width; ++j)
      g.c[m * g.c_row_stride + n + j] = finish(g, out[j], m, n + j);
  }
}

template <int M, int V>
OPENNEURON_INLINE void row_range(const SmallGemmF32& g, int64_t n0, int64_t n1) {
  constexpr int64_t kWidth = V * kLanes;
  for (int64_t n = n0; n < n1; n += kWidth) row_block<M, V>(g, n, std::min(kWidth, n1 - n));
}

// A single output column is one dot product; otherwise B's layout decides.
bool dot_layout(const SmallGemmF32& g) {
  return g.b_k_stride == 1 && (g.b_n_stride != 1 || g.n == 1);
}

template <int M>
OPENNEURON_INLINE void columns(const SmallGemmF32& g, int64_t n0, int64_t n1) {
  if (dot_layout(g)) {
    constexpr int U = M <= 2 ? 2 : 1;
    dot_product_range<M, 2, U>(g, n0, n1);
  } else {
    constexpr int V = M == 1 ? 8 : M <= 4 ? 4 : 2;
    row_range<M, V>(g, n0, n1);
  }
}

}  // namespace

// Measured against MKL's sgemm on an AVX-512 EPYC, 2 threads (M = 1..8,
// N 256..8000, K 40..4096): the dot layout pays a horizontal sum per output,
// so short rows lose; the row layout loses for many rows (accumulators
// spill) and for one row over a large B (strided walks down B's rows).
// Below 16K elements of B a product takes a few microseconds either way, and
// the BLAS keeps it (with its own rounding, which tests compare against).
bool small_gemm_applies(const SmallGemmF32& g) {
  if (g.m < 1 || g.m > kSmallGemmMaxRows || g.n < 0 || g.k < 0) return false;
  if (g.k * g.n < 16384) return false;
  if (dot_layout(g)) return g.k >= 128 && g.k >= 64 * g.m;
  if (g.b_n_stride == 1) return g.m <= 6 && (g.m >= 2 || g.k <= 1024);
  return false;
}

int64_t small_gemm_column_grain(const SmallGemmF32& g) {
  return std::max<int64_t>(64, 32768 / std::max<int64_t>(1, g.m * g.k));
}

OPENNEURON_SIMD_CLONES
void small_gemm_f32(const SmallGemmF32& g, int64_t n_begin, int64_t n_end) {
  switch (g.m) {
    case 1: return columns<1>(g, n_begin, n_end);
    case 2: return columns<2>(g, n_begin, n_end);
    case 3: return columns<3>(g, n_begin, n_end);
    case 4: return columns<4>(g, n_begin, n_end);
    case 5: return columns<5>(g, n_begin, n_end);
    case 6: return columns<6>(g, n_begin, n_end);
    case 7: return columns<7>(g, n_begin, n_end);
    case 8: return columns<8>(g, n_begin, n_end);
    default: return;
  }
}

}  // namespace openneuron::hal::host
