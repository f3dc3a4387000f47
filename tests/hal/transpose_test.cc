// The host driver's transposing copy: every element lands in place, over
// tile tails, a leading dimension wider than the rows, and row ranges split
// at arbitrary points (as parallel tasks split them); nothing outside the
// destination rows is written.
#include "hal/drivers/host/kernels/transpose.h"

#include <gtest/gtest.h>

#include <vector>

namespace openneuron::hal::host {
namespace {

TEST(TransposeTest, CopiesColumnMajorIntoRowMajorOverTailsAndSplits) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {5, 3}, {16, 16}, {37, 70}, {130, 17}}) {
    const int64_t ld = rows + 3;
    std::vector<float> src(ld * cols);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
    for (int64_t split : {int64_t{0}, rows / 3, rows}) {
      std::vector<float> dst(rows * cols + 1, -1.0f);  // one sentinel past the end
      transpose_f32(src.data(), ld, cols, dst.data(), 0, split);
      transpose_f32(src.data(), ld, cols, dst.data(), split, rows);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(dst[r * cols + c], src[c * ld + r]) << rows << "x" << cols << " at " << r << "," << c;
      EXPECT_EQ(dst.back(), -1.0f);
    }
  }
}

TEST(TransposeTest, WritesOnlyTheGivenRows) {
  const int64_t rows = 40, cols = 20;
  std::vector<float> src(rows * cols, 1.0f), dst(rows * cols, 0.0f);
  transpose_f32(src.data(), rows, cols, dst.data(), 16, 32);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(dst[r * cols + c], r >= 16 && r < 32 ? 1.0f : 0.0f) << r << "," << c;
}

}  // namespace
}  // namespace openneuron::hal::host
