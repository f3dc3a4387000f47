// Matrix products with few rows (M <= 8): one decode step of a language
// model multiplies a handful of token vectors by each weight matrix. BLAS
// libraries tune for large M and leave these far from memory bandwidth (MKL
// on this repo's machine: x @ W.t() for x [2, 256], W [8000, 256] takes
// ~6x the time of reading W once); here every output row is computed while
// each weight element is read once.
//
// Arithmetic is fixed by the shapes alone: each output element is computed by
// one thread in one order, so results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace openneuron::hal::host {

// C[m, n] = alpha * sum_k A[m, k] * B[k, n]  (+ beta * bias[m, n] when beta != 0)
// with A[m, k] = a[m * a_row_stride + k], C[m, n] = c[m * c_row_stride + n],
// B[k, n] = b[k * b_k_stride + n * b_n_stride] (one of the two strides is 1;
// give a dimension of size 1 stride 1),
// bias[m, n] = bias[m * bias_m_stride + n * bias_n_stride] (0 broadcasts).
// As for BLAS, beta == 0 ignores bias entirely (its NaNs do not propagate).
struct SmallGemmF32 {
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t a_row_stride = 0;
  const float* b = nullptr;
  int64_t b_k_stride = 0, b_n_stride = 0;
  float* c = nullptr;
  int64_t c_row_stride = 0;
  const float* bias = nullptr;
  int64_t bias_m_stride = 0, bias_n_stride = 0;
  float alpha = 1.0f, beta = 0.0f;
};

constexpr int64_t kSmallGemmMaxRows = 8;

// Whether small_gemm_f32 computes this product (row count, unit strides) and
// is expected to beat a BLAS at it.
bool small_gemm_applies(const SmallGemmF32& g);

// Computes output columns [n_begin, n_end) of every row; callers split the
// columns across threads.
void small_gemm_f32(const SmallGemmF32& g, int64_t n_begin, int64_t n_end);

// The fewest output columns worth a thread of their own (~32K multiply-adds,
// and at least one 64-column block): the grain callers split columns with.
int64_t small_gemm_column_grain(const SmallGemmF32& g);

}  // namespace openneuron::hal::host
