#include "hal/drivers/host/kernels/transpose.h"

#include <algorithm>

namespace openneuron::hal::host {
namespace {

constexpr int64_t kTile = 16;

// One tile of at most kTile x kTile: contiguous runs of a source column are
// read and contiguous runs of a destination row written, through a tile
// that stays in L1.
inline void transpose_tile(const float* src, int64_t src_ld, int64_t cols, float* dst,
                           int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  float tile[kTile][kTile];
  for (int64_t c = 0; c < nc; ++c) {
    const float* column = src + (c0 + c) * src_ld + r0;
    for (int64_t r = 0; r < nr; ++r) tile[c][r] = column[r];
  }
  for (int64_t r = 0; r < nr; ++r) {
    float* row = dst + (r0 + r) * cols + c0;
    for (int64_t c = 0; c < nc; ++c) row[c] = tile[c][r];
  }
}

}  // namespace

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void transpose_f32(const float* src, int64_t src_ld, int64_t cols, float* dst,
                   int64_t row_begin, int64_t row_end) {
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kTile) {
    const int64_t nr = std::min(kTile, row_end - r0);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      transpose_tile(src, src_ld, cols, dst, r0, nr, c0, std::min(kTile, cols - c0));
  }
}

}  // namespace openneuron::hal::host
