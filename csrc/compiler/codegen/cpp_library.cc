#include "compiler/codegen/cpp_library.h"

namespace openneuron::compiler {

// Batched GEMM with any strides (transposed operands need no copy):
//   C[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] + beta * X[b, m, n]
// buffers: A, B, C, X (X is ignored when beta == 0, as in BLAS);
// scalars: batch, m, n, k, then the strides (elements) of A (b, m, k),
// B (b, k, n), C (b, m, n), X (b, m, n), then alpha and beta as the bits of
// doubles. Blocked as BLIS does: B packed in panels of NR columns, A in
// panels of MR rows, an MR x NR register tile; row blocks run in parallel.
const char* const kCppLibrarySource = R"CPP(
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t MR = 6, NR = 16, KC = 256, MC = 96, NC = 4096;

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

template <class T>
void pack_b(const T* b, const Gemm& g, int64_t pc, int64_t kc, int64_t jc, int64_t nc, T* out) {
  for (int64_t jp = 0; jp * NR < nc; ++jp)
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

template <class T>
void tile(const T* ap, const T* bp, int64_t kc, T (&acc)[MR][NR]) {
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

template <class T>
void gemm(void** buffers, const int64_t* scalars, int64_t threads) {
  const Gemm g = read(scalars);
  if (threads < 1) threads = 1;
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const T* a = static_cast<const T*>(buffers[0]) + bi * g.a_b;
    const T* b = static_cast<const T*>(buffers[1]) + bi * g.b_b;
    T* c = static_cast<T*>(buffers[2]) + bi * g.c_b;
    const T* x = static_cast<const T*>(buffers[3]) + bi * g.x_b;
    if (g.k == 0) {  // no products: beta * X, or zeros
      const T zero[MR][NR] = {};
      for (int64_t i = 0; i < g.m; i += MR)
        for (int64_t j = 0; j < g.n; j += NR)
          store<T>(g, c, x, i, j, std::min(MR, g.m - i), std::min(NR, g.n - j), true, zero);
      continue;
    }
    for (int64_t jc = 0; jc < g.n; jc += NC) {
      const int64_t nc = std::min(NC, g.n - jc);
      std::vector<T> bp(((nc + NR - 1) / NR) * NR * KC);
      for (int64_t pc = 0; pc < g.k; pc += KC) {
        const int64_t kc = std::min(KC, g.k - pc);
        pack_b(b, g, pc, kc, jc, nc, bp.data());
        const int64_t blocks = (g.m + MC - 1) / MC;
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (blocks > 1 && g.m * nc * kc > 32768)
        for (int64_t blk = 0; blk < blocks; ++blk) {
          const int64_t ic = blk * MC, mc = std::min(MC, g.m - ic);
          std::vector<T> ap(((mc + MR - 1) / MR) * MR * kc);
          pack_a(a, g, ic, mc, pc, kc, ap.data());
          T acc[MR][NR];
          for (int64_t jr = 0; jr < nc; jr += NR)
            for (int64_t ir = 0; ir < mc; ir += MR) {
              tile<T>(ap.data() + (ir / MR) * kc * MR, bp.data() + (jr / NR) * kc * NR, kc, acc);
              store<T>(g, c, x, ic + ir, jc + jr, std::min(MR, mc - ir), std::min(NR, nc - jr), pc == 0, acc);
            }
        }
      }
    }
  }
}

}  // namespace

extern "C" void gemm_f32(void** b, const int64_t* s, int64_t t) { gemm<float>(b, s, t); }
extern "C" void gemm_f64(void** b, const int64_t* s, int64_t t) { gemm<double>(b, s, t); }
// bindings, scalars, workgroup size (x, y, z)
extern "C" const int64_t gemm_f32_info[5] = {4, 18, 1, 1, 1};
extern "C" const int64_t gemm_f64_info[5] = {4, 18, 1, 1, 1};
)CPP";

}  // namespace openneuron::compiler
