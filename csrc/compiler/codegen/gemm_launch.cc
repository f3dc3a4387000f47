#include "compiler/codegen/gemm_launch.h"

#include <algorithm>
#include <climits>

namespace openneuron::compiler {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

GemmLaunch gemm_launch(const GemmShape& s, bool float32, bool tiled, int compute_units,
                       int64_t max_workgroups) {
  max_workgroups = std::max<int64_t>(1, max_workgroups);
  // Thin products (a row of tokens, a matrix-vector product) would leave most
  // of a tile idle; offsets past 31 bits need the 64-bit kernel.
  const bool fits = s.largest_offset < INT32_MAX && s.m < INT32_MAX && s.n < INT32_MAX && s.k < INT32_MAX;
  if (float32 && tiled && fits && s.m >= 32 && s.n >= 32) {
    const int64_t big = s.batch * ceil_div(s.m, 128) * ceil_div(s.n, 128);
    if (big >= std::max(1, compute_units)) return {"gemm_t128", std::min(big, max_workgroups)};
    return {"gemm_t64", std::min(s.batch * ceil_div(s.m, 64) * ceil_div(s.n, 64), max_workgroups)};
  }
  const int64_t blocks = s.batch * ceil_div(s.m, 4) * ceil_div(s.n, 4);
  return {"gemm", std::min(ceil_div(blocks, 64), max_workgroups)};
}

}  // namespace openneuron::compiler
