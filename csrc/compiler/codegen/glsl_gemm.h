// The GLSL library's matrix products: C[b] = alpha A[b] B[b] + beta X[b]
// over any strides (transposed operands are read in place, never copied).
// All entries take the same arguments: buffers A, B, C, X; scalars batch,
// m, n, k, the (b, m/k, k/n) strides of A, B, C, X in elements, then alpha
// and beta as the bits of doubles (beta == 0 ignores X, NaNs included).
//
// float16 and bfloat16 ("_f16", "_bf16": gemm and the tiled gemm entries)
// are widened to float on load and rounded once on store.
//
//   gemm_f32, gemm_f64    one invocation per 4x4 block of C, straight from
//                         global memory: no shared memory, no barriers
//                         (float64, thin products, devices whose limits
//                         refuse the tiled kernels).
//   gemm_t128_f32,        256 invocations per 128x128
//   gemm_t64_f32          (64x64) tile of C, staging 16-deep slices of A and
//                         B in shared memory, each invocation accumulating
//                         8x8 (4x4) results in registers. Offsets within one
//                         matrix must fit 31 bits (gemm_launch.h checks).
//   conv2d_t128_f32,      the tiled kernels as an implicit GEMM for a
//   conv2d_t64_f32        convolution: B is the input's columns, read in
//                         place (29 scalars: glsl_gemm.cc says which);
//   conv2d_dgrad_t*_f32,  and for its input's gradient, and for each
//   conv2d_wgrad_t*_f32   image's share of its weights' gradient.
//   gemm_coop_f16,        float16 products on matrix units, and the same
//   gemm_coop_emulated_f16  kernel in plain arithmetic (glsl_gemm_coop.h).
//   gemm_rows_f32         products with at most 8 rows (or, swapped, 8
//                         columns): a decode step, a matrix-vector product;
//                         a workgroup's invocations split k.
#pragma once

#include <string>

namespace openneuron::compiler {

std::string glsl_gemm_entries();

// The arguments every gemm entry reads, as GLSL declarations (a, bm, c, x;
// batch, m, n, k; the strides a_b ... x_n; use_x), at the top of main().
extern const char* const kGlslGemmArguments;

}  // namespace openneuron::compiler
