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

// The register tile: MR rows of NR columns. AVX-512 holds a 12 x 32 float
// tile in 24 of its 32 registers: per k step 2 loads of B and 12 broadcasts
// of A feed 24 FMAs, so both FMA ports stay busy (an 8 x 16 tile issues 9
// loads per 8 FMAs and waits on the load ports). AVX2: a 6 x 16 tile in 12.
#if defined(__AVX512F__)
constexpr int64_t MR = 12, NR = 32;
#else
constexpr int64_t MR = 6, NR = 16;
#endif
constexpr int64_t KC = 256, MC = 96, NC = 4096;

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

// Packing buffers, kept per thread and reused: a product is often small
// (attention's bmm runs thousands), and a fresh zeroed vector per call costs
// more than the product itself (an mmap and page faults above 128 KiB).
enum Scratch { kPackedB, kSharedA, kOwnA };
template <class T>
T* scratch(Scratch slot, size_t elements) {
  thread_local std::vector<T> buffers[3];
  std::vector<T>& buffer = buffers[slot];
  if (buffer.size() < elements) buffer.resize(elements);
  return buffer.data();
}

// out[p * width + r] = src[r * ld + p] for r < rows (zeros up to width):
// an operand whose k dimension is contiguous, turned k-major for the tile.
// float rows go through 8x8 and 4x4 register transposes; packing is a large
// share of small products (attention's bmm) and scalar copies here cost as
// much as the multiply-adds.
#if defined(__AVX__)
inline void transpose8x8(const float* src, int64_t ld, float* dst, int64_t dst_ld) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * dst_ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * dst_ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

inline void transpose4x4(const float* src, int64_t ld, float* dst, int64_t dst_ld) {
  __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + ld), r2 = _mm_loadu_ps(src + 2 * ld),
         r3 = _mm_loadu_ps(src + 3 * ld);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(dst, r0);
  _mm_storeu_ps(dst + dst_ld, r1);
  _mm_storeu_ps(dst + 2 * dst_ld, r2);
  _mm_storeu_ps(dst + 3 * dst_ld, r3);
}
#endif

template <class T>
void pack_transposed(const T* src, int64_t ld, int64_t rows, int64_t kc, int64_t width, T* out) {
  int64_t r0 = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    for (const int64_t block : {8, 4}) {
      for (; r0 + block <= rows; r0 += block) {
        int64_t p = 0;
        for (; p + block <= kc; p += block) {
          if (block == 8) transpose8x8(src + r0 * ld + p, ld, out + p * width + r0, width);
          else transpose4x4(src + r0 * ld + p, ld, out + p * width + r0, width);
        }
        for (; p < kc; ++p)
          for (int64_t r = r0; r < r0 + block; ++r) out[p * width + r] = src[r * ld + p];
      }
    }
  }
#endif
  for (int64_t r = r0; r < width; ++r)  // rows left over, then the zero padding
    for (int64_t p = 0; p < kc; ++p) out[p * width + r] = r < rows ? src[r * ld + p] : T(0);
}

// Panel jp (NR columns) of B's block (pc..pc+kc, jc..jc+nc), k-major.
template <class T>
void pack_b_panel(const T* b, const Gemm& g, int64_t pc, int64_t kc, int64_t jc, int64_t nc, int64_t jp, T* out) {
  out += jp * kc * NR;
  const int64_t cols = std::min(NR, nc - jp * NR);
  const T* first = b + pc * g.b_k + (jc + jp * NR) * g.b_n;
  if (g.b_n == 1 && cols == NR) {  // rows of B contiguous
    for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * NR, first + p * g.b_k, NR * sizeof(T));
  } else if (g.b_k == 1) {  // columns of B contiguous (B transposed)
    pack_transposed(first, g.b_n, cols, kc, NR, out);
  } else {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t j = 0; j < NR; ++j) out[p * NR + j] = j < cols ? first[p * g.b_k + j * g.b_n] : T(0);
  }
}

// A's rows ic..ic+mc, k block pc..pc+kc, in panels of MR rows, k-major.
template <class T>
void pack_a(const T* a, const Gemm& g, int64_t ic, int64_t mc, int64_t pc, int64_t kc, T* out) {
  const int64_t full_panels = g.a_m == 1 ? mc / MR : 0;
  if (full_panels) {  // columns of A contiguous (A transposed): each of A's k rows read once, in order
    // (panel by panel would read kc rows a large power-of-two stride apart,
    // all in one cache set, once per panel)
    for (int64_t p = 0; p < kc; ++p) {
      const T* row = a + ic + (pc + p) * g.a_k;
      for (int64_t ip = 0; ip < full_panels; ++ip)
        std::memcpy(out + (ip * kc + p) * MR, row + ip * MR, MR * sizeof(T));
    }
  }
  for (int64_t ip = full_panels; ip * MR < mc; ++ip) {
    T* dst = out + ip * kc * MR;
    const int64_t rows = std::min(MR, mc - ip * MR);
    const T* first = a + (ic + ip * MR) * g.a_m + pc * g.a_k;
    if (g.a_k == 1) {  // rows of A contiguous
      pack_transposed(first, g.a_m, rows, kc, MR, dst);
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < MR; ++i) dst[p * MR + i] = i < rows ? first[i * g.a_m + p * g.a_k] : T(0);
    }
  }
}

// float tiles with fused multiply-adds, as BLAS kernels compute them (the
// library is built with -ffp-contract=off, so a * b + c would round twice).
#if defined(__AVX512F__)
inline void tile_f32(const float* ap, const float* bp, int64_t kc, float (&acc)[MR][NR]) {
  __m512 c[MR][2];
  for (int64_t i = 0; i < MR; ++i) c[i][0] = c[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(bp + p * NR), b1 = _mm512_loadu_ps(bp + p * NR + 16);
    for (int64_t i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(ap[p * MR + i]);
      c[i][0] = _mm512_fmadd_ps(a, b0, c[i][0]);
      c[i][1] = _mm512_fmadd_ps(a, b1, c[i][1]);
    }
  }
  for (int64_t i = 0; i < MR; ++i) {
    _mm512_storeu_ps(acc[i], c[i][0]);
    _mm512_storeu_ps(acc[i] + 16, c[i][1]);
  }
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
// Rows of C (and X) with unit column stride take a vectorisable path: the
// same operations in the same order, so the same bits; k-heavy products
// (weight gradients) store every C tile once per k block.
template <class T>
void store(const Gemm& g, T* c, const T* x, int64_t i0, int64_t j0, int64_t mr, int64_t nr, bool first,
           const T (&acc)[MR][NR]) {
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  const bool with_x = first && g.beta != 0;
  if (g.c_n == 1 && (!with_x || g.x_n == 1)) {
    for (int64_t i = 0; i < mr; ++i) {
      T* out = c + (i0 + i) * g.c_m + j0;
      const T* xr = with_x ? x + (i0 + i) * g.x_m + j0 : nullptr;
      if (with_x) {
#pragma omp simd
        for (int64_t j = 0; j < nr; ++j) out[j] = beta * xr[j] + alpha * acc[i][j];
      } else if (first) {
#pragma omp simd
        for (int64_t j = 0; j < nr; ++j) out[j] = T(0) + alpha * acc[i][j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < nr; ++j) out[j] = out[j] + alpha * acc[i][j];
      }
    }
    return;
  }
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) {
      T* out = c + (i0 + i) * g.c_m + (j0 + j) * g.c_n;
      T base = first ? (with_x ? beta * x[(i0 + i) * g.x_m + (j0 + j) * g.x_n] : T(0)) : *out;
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
    const int64_t kc_max = std::min(KC, g.k);
    T* const bp = scratch<T>(kPackedB, panels * NR * kc_max);
    // With column groups, a row block's A panel serves several units: it is
    // packed once, beside B, instead of once per unit.
    const int64_t shared_a_panels = groups > 1 ? (g.m + MR - 1) / MR : 0;
    T* const shared_ap = scratch<T>(kSharedA, shared_a_panels * MR * kc_max);
    const bool parallel = threads > 1 && g.m * nc * kc_max > 32768;
#pragma omp parallel num_threads(threads) if (parallel)
    {
      T* const own_ap = shared_a_panels ? nullptr : scratch<T>(kOwnA, ((MC + MR - 1) / MR) * MR * kc_max);
      T acc[MR][NR];
      for (int64_t pc = 0; pc < g.k; pc += KC) {
        const int64_t kc = std::min(KC, g.k - pc);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < panels + shared_a_panels; ++t) {
          if (t < panels) {
            pack_b_panel(b, g, pc, kc, jc, nc, t, bp);
          } else {
            const int64_t i0 = (t - panels) * MR;
            pack_a(a, g, i0, std::min(MR, g.m - i0), pc, kc, shared_ap + i0 * kc);
          }
        }
        // (the loop's barrier: B is packed before any unit reads it, and
        // every unit is done before the next k block repacks it)
#pragma omp for schedule(dynamic)
        for (int64_t unit = 0; unit < blocks * groups; ++unit) {
          const int64_t ic = (unit / groups) * MC, mc = std::min(MC, g.m - ic);
          const int64_t j0 = (unit % groups) * per_group, j1 = std::min(panels, j0 + per_group);
          if (j0 >= j1) continue;
          const T* ap = shared_a_panels ? shared_ap + ic * kc : own_ap;
          if (!shared_a_panels) pack_a(a, g, ic, mc, pc, kc, own_ap);
          for (int64_t jp = j0; jp < j1; ++jp)
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int64_t jr = jp * NR;
              tile<T>(ap + (ir / MR) * kc * MR, bp + jp * kc * NR, kc, acc);
              store<T>(g, c, x, ic + ir, jc + jr, std::min(MR, mc - ir), std::min(NR, nc - jr), pc == 0, acc);
            }
        }
      }
    }
  }
}

template <class T>
void gemm_with(const Gemm& g, void** buffers, int64_t threads) {
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

template <class T>
void gemm(void** buffers, const int64_t* scalars, int64_t threads) {
  gemm_with<T>(read(scalars), buffers, threads);
}

// 16-bit products (float16, bfloat16) as CUDA computes them by default:
// the operands widened to float (contiguous copies), the float gemm, each
// result rounded once to the 16-bit type.
inline float widen(_Float16 v) { return static_cast<float>(v); }
inline float widen(uint16_t bf16) {
  const uint32_t u = static_cast<uint32_t>(bf16) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline void narrow(float f, _Float16* out) { *out = static_cast<_Float16>(f); }
inline void narrow(float f, uint16_t* out) {  // round to nearest even; NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  *out = f != f ? uint16_t(0x7fc0) : static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// `rows` x `cols` matrices of a batch, strided, widened into contiguous floats.
template <class S>
std::vector<float> widened(const S* t, int64_t batch, int64_t rows, int64_t cols, int64_t sb, int64_t sr,
                           int64_t sc) {
  std::vector<float> out(static_cast<size_t>(batch * rows * cols));
  float* o = out.data();
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) *o++ = widen(t[bi * sb + i * sr + j * sc]);
  return out;
}

template <class S>
void gemm16(void** buffers, const int64_t* scalars, int64_t threads) {
  const Gemm g = read(scalars);
  const bool with_x = g.beta != 0.0;
  std::vector<float> a = widened(static_cast<const S*>(buffers[0]), g.batch, g.m, g.k, g.a_b, g.a_m, g.a_k);
  std::vector<float> b = widened(static_cast<const S*>(buffers[1]), g.batch, g.k, g.n, g.b_b, g.b_k, g.b_n);
  std::vector<float> x = with_x ? widened(static_cast<const S*>(buffers[3]), g.batch, g.m, g.n, g.x_b, g.x_m, g.x_n)
                                : std::vector<float>();
  std::vector<float> c(static_cast<size_t>(g.batch * g.m * g.n));
  Gemm f = g;
  f.a_b = g.m * g.k, f.a_m = g.k, f.a_k = 1;
  f.b_b = g.k * g.n, f.b_k = g.n, f.b_n = 1;
  f.c_b = f.x_b = g.m * g.n, f.c_m = f.x_m = g.n, f.c_n = f.x_n = 1;
  void* float_buffers[4] = {a.data(), b.data(), c.data(), with_x ? x.data() : c.data()};
  gemm_with<float>(f, float_buffers, threads);
  S* out = static_cast<S*>(buffers[2]);
  const float* r = c.data();
  for (int64_t bi = 0; bi < g.batch; ++bi)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) narrow(*r++, out + bi * g.c_b + i * g.c_m + j * g.c_n);
}

}  // namespace

extern "C" void gemm_f32(void** b, const int64_t* s, int64_t t) { gemm<float>(b, s, t); }
extern "C" void gemm_f64(void** b, const int64_t* s, int64_t t) { gemm<double>(b, s, t); }
// bindings, scalars, workgroup size (x, y, z)
extern "C" const int64_t gemm_f32_info[5] = {4, 18, 1, 1, 1};
extern "C" const int64_t gemm_f64_info[5] = {4, 18, 1, 1, 1};
extern "C" void gemm_f16(void** b, const int64_t* s, int64_t t) { gemm16<_Float16>(b, s, t); }
extern "C" void gemm_bf16(void** b, const int64_t* s, int64_t t) { gemm16<uint16_t>(b, s, t); }
extern "C" const int64_t gemm_f16_info[5] = {4, 18, 1, 1, 1};
extern "C" const int64_t gemm_bf16_info[5] = {4, 18, 1, 1, 1};
)CPP";

}  // namespace openneuron::compiler
