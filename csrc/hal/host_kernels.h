// Kernels a CPU driver lends to host code that works on its memory in place
// (DeviceProperties::host_addressable): the PyTorch layer's host-only path
// reaches them through Driver::host_kernels(), never by including a
// driver's files. Drivers whose memory the host cannot address lend none.
#pragma once

#include <cstdint>

namespace openneuron::hal {

// A float32 product with few rows (drivers/host/kernels/small_gemm.h):
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
// Rows per parallel task of transpose_f32: a multiple of its tile height.
constexpr int64_t kTransposeRowGrain = 64;

struct HostKernels {
  // Whether small_gemm_f32 computes this product and beats a BLAS at it.
  bool (*small_gemm_applies)(const SmallGemmF32& g);
  // Output columns [n_begin, n_end) of every row; callers split columns.
  void (*small_gemm_f32)(const SmallGemmF32& g, int64_t n_begin, int64_t n_end);
  // The fewest output columns worth a thread of their own.
  int64_t (*small_gemm_column_grain)(const SmallGemmF32& g);
  // dst[r * cols + c] = src[c * src_ld + r] for r in [row_begin, row_end).
  void (*transpose_f32)(const float* src, int64_t src_ld, int64_t cols, float* dst,
                        int64_t row_begin, int64_t row_end);
};

}  // namespace openneuron::hal
