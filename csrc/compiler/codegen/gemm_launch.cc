#include "compiler/codegen/gemm_launch.h"

#include <algorithm>
#include <climits>

#ifdef OPENNEURON_COMPILER_GLSL
#include "compiler/codegen/glsl_gemm_coop.h"
#endif

namespace openneuron::compiler {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr int64_t kFewRows = 8;  // at most: gemm_rows (a 64x64 tile would be 8x idle)
constexpr int64_t kSplitK = 64;  // at least: gemm_rows

}  // namespace

GemmLaunch gemm_launch(const GemmShape& s, bool float32, bool tiled, int compute_units,
                       int64_t max_workgroups, bool sixteen_bit, const std::string& matrix_entry) {
  max_workgroups = std::max<int64_t>(1, max_workgroups);
  // Offsets past 31 bits need the 64-bit kernel; products with a few rows
  // (or columns) would leave most of a tile idle.
  const bool fits = s.largest_offset < INT32_MAX && s.m < INT32_MAX && s.n < INT32_MAX && s.k < INT32_MAX;
  const int64_t blocks = s.batch * ceil_div(s.m, 4) * ceil_div(s.n, 4);  // the direct kernel's invocations
  // A thin product's direct kernel wins where its invocations fill the
  // device: on lavapipe (two cores) from 128 invocations, where the rows
  // kernel's barriers cost 4x what they save (1x3072 @ 3072x768: 0.2 against
  // 0.05 GFLOP/s); on a GPU the direct kernel would leave most of the chip
  // idle. (A rule measured on lavapipe only: to tune on a GPU.)
  const bool direct_fills = blocks >= int64_t{std::max(1, compute_units)} * 64;
  // Splitting a short k gains nothing, and summing in k's order (as the
  // other kernels do) keeps tiny products closest to the CPU's rounding.
  const bool long_k = s.k >= kSplitK;
  if (float32 && tiled && fits && std::min(s.m, s.n) <= kFewRows && long_k && !direct_fills) {
    const bool swap = s.n < s.m;
    return {"gemm_rows", std::min(s.batch * ceil_div(swap ? s.m : s.n, 8), max_workgroups), swap};
  }
  if (!matrix_entry.empty() && sixteen_bit && tiled && fits && std::min(s.m, s.n) > kFewRows)
    return {matrix_entry, std::min(s.batch * ceil_div(s.m, 128) * ceil_div(s.n, 128), max_workgroups)};
  if ((float32 || sixteen_bit) && tiled && fits && std::min(s.m, s.n) > kFewRows) {
    const int64_t big = s.batch * ceil_div(s.m, 128) * ceil_div(s.n, 128);
    if (big >= std::max(1, compute_units)) return {"gemm_t128", std::min(big, max_workgroups)};
    return {"gemm_t64", std::min(s.batch * ceil_div(s.m, 64) * ceil_div(s.n, 64), max_workgroups)};
  }
  return {"gemm", std::min(ceil_div(blocks, 64), max_workgroups)};
}

std::string float16_matrix_entry(bool cooperative, bool emulated) {
  if (emulated) return "gemm_coop_emulated";
#ifdef OPENNEURON_COMPILER_GLSL
  if (cooperative && !glsl_coop_gemm_spirv().empty()) return "gemm_coop";
#endif
  return "";
}

std::vector<int64_t> swapped_gemm_scalars(const std::vector<int64_t>& s) {
  // batch, m, n, k, A (b, m, k), B (b, k, n), C (b, m, n), X (b, m, n), alpha, beta:
  // A' = B^T (n x k), B' = A^T (k x m), C' = C^T, X' = X^T.
  return {s[0], s[2], s[1], s[3], s[7], s[9], s[8], s[4], s[6], s[5],
          s[10], s[12], s[11], s[13], s[15], s[14], s[16], s[17]};
}

}  // namespace openneuron::compiler
