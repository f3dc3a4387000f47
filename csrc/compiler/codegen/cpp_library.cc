#include "compiler/codegen/cpp_library.h"

namespace openneuron::compiler {

// Batched GEMM with any strides (transposed operands need no copy):
//   C[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] + beta * X[b, m, n]
// buffers: A, B, C, X (X is ignored when beta == 0, as in BLAS);
// scalars: batch, m, n, k, then the strides (elements) of A (b, m, k),
// B (b, k, n), C (b, m, n), X (b, m, n), then alpha and beta as the bits of
// doubles. Blocked as BLIS does: B packed in panels of NR columns, A in
// panels of MR rows, an MR x NR register tile (float: fused multiply-adds
// with AVX-512 or AVX2 intrinsics); row blocks (and column panel groups
// when there are few) run in parallel, products of a large batch one per
// thread.
const char* const kCppLibrarySource = R"CPP(
#include <algorithm>
#include <immintrin.h>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

// The register tile: MR rows of NR columns. AVX-512 holds an 8 x 16 float
// tile in 8 registers (enough independent FMAs to fill both FMA ports);
// AVX2 a 6 x 16 one in 12.
#if defined(__AVX512F__)
constexpr int64_t MR = 8;
#else
constexpr int64_t MR = 6;
#endif
constexpr int64_t NR = 16, KC = 256, MC = 96, NC = 4096;

struct Gemm {
  int64_t batch, m, n, k;
  int64_t a_b, a_m, a_k, b_b, b_k, b_n, c_b, c_m, c_n, x_b, x_m, x_n;
  double alpha, beta;
};

Gemm read(const int64_t* s) {
  Gemm g;
  std::memcpy(&g, s, 16 * sizeof(int64_t));
  std::memcpy(&g.alpha, s + 16, 8);
  std::memcpy(&g.beta, s + 17, 8);
  return g;
}

// Panel jp (NR columns) of B's block (pc..pc+kc, jc..jc+nc), k-major.
template <class T>
void pack_b_panel(const T* b, const Gemm& g, int64_t pc, int64_t kc, int64_t jc, int64_t nc, int64_t jp, T* out) {
  for (int64_t p = 0; p < kc; ++p) {
    T* dst = out + (jp * kc + p) * NR;
    const T* src = b + (pc + p) * g.b_k;
    for (int64_t j = 0; j < NR; ++j) {
      const int64_t col = jp * NR + j;
      dst[j] = col < nc ? src[(jc + col) * g.b_n] : T(0);
    }
  }
}

template <class T>
void pack_a(const T* a, const Gemm& g, int64_t ic, int64_t mc, int64_t pc, int64_t kc, T* out) {
  for (int64_t ip = 0; ip * MR < mc; ++ip)
    for (int64_t p = 0; p < kc; ++p) {
      T* dst = out + (ip * kc + p) * MR;
      for (int64_t i = 0; i < MR; ++i) {
        const int64_t row = ip * MR + i;
        dst[i] = row < mc ? a[(ic + row) * g.a_m + (pc + p) * g.a_k] : T(0);
      }
    }
}

// float tiles with fused multiply-adds, as BLAS kernels compute them (the
// library is built with -ffp-contract=off, so a * b + c would round twice).
#if defined(__AVX512F__)
inline void tile_f32(const float* ap, const float* bp, int64_t kc, float (&acc)[MR][NR]) {
  __m512 c[MR];
  for (int64_t i = 0; i < MR; ++i) c[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b = _mm512_loadu_ps(bp + p * NR);
    for (int64_t i = 0; i < MR; ++i) c[i] = _mm512_fmadd_ps(_mm512_set1_ps(ap[p * MR + i]), b, c[i]);
  }
  for (int64_t i = 0; i < MR; ++i) _mm512_storeu_ps(acc[i], c[i]);
}
#define OPENNEURON_TILE_F32 1
#elif defined(__AVX2__) && defined(__FMA__)
inline void tile_f32(const float* ap, const float* bp, int64_t kc, float (&acc)[MR][NR]) {
  __m256 c[MR][2];
  for (int64_t i = 0; i < MR; ++i) c[i][0] = c[i][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(bp + p * NR), b1 = _mm256_loadu_ps(bp + p * NR + 8);
    for (int64_t i = 0; i < MR; ++i) {
      const __m256 a = _mm256_set1_ps(ap[p * MR + i]);
      c[i][0] = _mm256_fmadd_ps(a, b0, c[i][0]);
      c[i][1] = _mm256_fmadd_ps(a, b1, c[i][1]);
    }
  }
  for (int64_t i = 0; i < MR; ++i) {
    _mm256_storeu_ps(acc[i], c[i][0]);
    _mm256_storeu_ps(acc[i] + 8, c[i][1]);
  }
}
#define OPENNEURON_TILE_F32 1
#endif

template <class T>
void tile(const T* ap, const T* bp, int64_t kc, T (&acc)[MR][NR]) {
#ifdef OPENNEURON_TILE_F32
  if constexpr (std::is_same_v<T, float>) return tile_f32(ap, bp, kc, acc);
#endif
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t j = 0; j < NR; ++j) acc[i][j] = T(0);
  for (int64_t p = 0; p < kc; ++p) {
    const T* av = ap + p * MR;
    const T* bv = bp + p * NR;
    for (int64_t i = 0; i < MR; ++i) {
      const T x = av[i];
#pragma omp simd
      for (int64_t j = 0; j < NR; ++j) acc[i][j] += x * bv[j];
    }
  }
}

// C's first k block starts from beta * X (or nothing), later ones add to C.
template <class T>
void store(const Gemm& g, T* c, const T* x, int64_t i0, int64_t j0, int64_t mr, int64_t nr, bool first,
           const T (&acc)[MR][NR]) {
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) {
      T* out = c + (i0 + i) * g.c_m + (j0 + j) * g.c_n;
      T base = first ? (g.beta != 0 ? beta * x[(i0 + i) * g.x_m + (j0 + j) * g.x_n] : T(0)) : *out;
      *out = base + alpha * acc[i][j];
    }
}

// One product of the batch, its row blocks over `threads` threads.
template <class T>
void gemm_one(const Gemm& g, const T* a, const T* b, T* c, const T* x, int64_t threads) {
  if (g.k == 0) {  // no products: beta * X, or zeros
    const T zero[MR][NR] = {};
    for (int64_t i = 0; i < g.m; i += MR)
      for (int64_t j = 0; j < g.n; j += NR)
        store<T>(g, c, x, i, j, std::min(MR, g.m - i), std::min(NR, g.n - j), true, zero);
    return;
  }
  const int64_t blocks = (g.m + MC - 1) / MC;
  for (int64_t jc = 0; jc < g.n; jc += NC) {
    const int64_t nc = std::min(NC, g.n - jc);
    const int64_t panels = (nc + NR - 1) / NR;
    // Work units: a row block, split into groups of column panels when there
    // are too few row blocks to keep the threads busy (k-heavy products such
    // as weight gradients). Each C tile has one unit, in a fixed k order, so
    // results do not depend on the thread count.
    const int64_t groups =
        threads == 1 || blocks >= 2 * threads ? 1 : std::min(panels, (4 * threads + blocks - 1) / blocks);
    const int64_t per_group = (panels + groups - 1) / groups;
    std::vector<T> bp(panels * NR * KC);
    const bool parallel = threads > 1 && g.m * nc * std::min(g.k, KC) > 32768;
#pragma omp parallel num_threads(threads) if (parallel)
    {
      std::vector<T> ap(((MC + MR - 1) / MR) * MR * KC);
      T acc[MR][NR];
      for (int64_t pc = 0; pc < g.k; pc += KC) {
        const int64_t kc = std::min(KC, g.k - pc);
#pragma omp for schedule(static)
        for (int64_t jp = 0; jp < panels; ++jp) pack_b_panel(b, g, pc, kc, jc, nc, jp, bp.data());
        // (the loop's barrier: B is packed before any unit reads it, and
        // every unit is done before the next k block repacks it)
#pragma omp for schedule(dynamic)
        for (int64_t unit = 0; unit < blocks * groups; ++unit) {
          const int64_t ic = (unit / groups) * MC, mc = std::min(MC, g.m - ic);
          const int64_t j0 = (unit % groups) * per_group, j1 = std::min(panels, j0 + per_group);
          if (j0 >= j1) continue;
          pack_a(a, g, ic, mc, pc, kc, ap.data());
          for (int64_t jp = j0; jp < j1; ++jp)
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int64_t jr = jp * NR;
              tile<T>(ap.data() + (ir / MR) * kc * MR, bp.data() + jp * kc * NR, kc, acc);
              store<T>(g, c, x, ic + ir, jc + jr, std::min(MR, mc - ir), std::min(NR, nc - jr), pc == 0, acc);
            }
        }
      }
    }
  }
}

template <class T>
void gemm(void** buffers, const int64_t* scalars, int64_t threads) {
  const Gemm g = read(scalars);
  if (threads < 1) threads = 1;
  auto one = [&](int64_t bi, int64_t inner_threads) {
    gemm_one<T>(g, static_cast<const T*>(buffers[0]) + bi * g.a_b, static_cast<const T*>(buffers[1]) + bi * g.b_b,
                static_cast<T*>(buffers[2]) + bi * g.c_b, static_cast<const T*>(buffers[3]) + bi * g.x_b,
                inner_threads);
  };
  // Many small products (attention's bmm): one product per thread at a
  // time; each is computed by one thread in the same order as alone, so the
  // results do not depend on the split.
  if (g.batch >= 2 * threads && threads > 1) {
#pragma omp parallel for num_threads(threads) schedule(dynamic)
    for (int64_t bi = 0; bi < g.batch; ++bi) one(bi, 1);
    return;
  }
  for (int64_t bi = 0; bi < g.batch; ++bi) one(bi, threads);
}

}  // namespace

extern "C" void gemm_f32(void** b, const int64_t* s, int64_t t) { gemm<float>(b, s, t); }
extern "C" void gemm_f64(void** b, const int64_t* s, int64_t t) { gemm<double>(b, s, t); }
// bindings, scalars, workgroup size (x, y, z)
extern "C" const int64_t gemm_f32_info[5] = {4, 18, 1, 1, 1};
extern "C" const int64_t gemm_f64_info[5] = {4, 18, 1, 1, 1};
)CPP";

}  // namespace openneuron::compiler
