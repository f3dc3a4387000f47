// Which GLSL gemm kernel runs a product (compiler/codegen/gemm_launch.h).
#include <gtest/gtest.h>

#include <climits>

#include "compiler/codegen/gemm_launch.h"

namespace openneuron::compiler {
namespace {

constexpr int kGpuUnits = 132;  // an H100's SMs
constexpr int kCpuUnits = 2;    // lavapipe on this machine
constexpr int64_t kMaxGroups = 65535;

GemmLaunch launch(int64_t m, int64_t n, int64_t k, int units = kGpuUnits, bool tiled = true, bool float32 = true) {
  return gemm_launch(GemmShape{1, m, n, k, m * k + k * n}, float32, tiled, units, kMaxGroups);
}

TEST(GemmLaunch, LargeProductsTakeTheBigTileAndSmallOnesTheSmall) {
  EXPECT_EQ(launch(4096, 4096, 4096).entry, "gemm_t128");
  EXPECT_EQ(launch(4096, 4096, 4096).workgroups, 32 * 32);
  EXPECT_EQ(launch(256, 256, 256).entry, "gemm_t64");  // 4 big tiles would leave 128 units idle
  EXPECT_EQ(launch(256, 256, 256, kCpuUnits).entry, "gemm_t128");
  EXPECT_EQ(launch(9, 100, 10).entry, "gemm_t64");
}

TEST(GemmLaunch, FewRowsOrColumnsTakeTheRowsKernelOnAGpu) {
  const GemmLaunch rows = launch(1, 2304, 768);
  EXPECT_EQ(rows.entry, "gemm_rows");
  EXPECT_FALSE(rows.swap_operands);
  EXPECT_EQ(rows.workgroups, 2304 / 8);
  const GemmLaunch cols = launch(2304, 3, 768);
  EXPECT_EQ(cols.entry, "gemm_rows");
  EXPECT_TRUE(cols.swap_operands);
  EXPECT_EQ(cols.workgroups, 2304 / 8);
  // Where the direct kernel already fills the device (lavapipe), it runs.
  EXPECT_EQ(launch(1, 2304, 768, kCpuUnits).entry, "gemm");
  EXPECT_EQ(launch(1, 768, 3072, kCpuUnits).entry, "gemm");
  EXPECT_EQ(launch(1, 60, 768, kCpuUnits).entry, "gemm_rows");
  EXPECT_EQ(launch(1, 2304, 63).entry, "gemm");  // too short to split
}

TEST(GemmLaunch, DirectKernelWithoutTilesForFloat64AndPast31Bits) {
  EXPECT_EQ(launch(4096, 4096, 4096, kGpuUnits, false).entry, "gemm");
  EXPECT_EQ(launch(4096, 4096, 4096, kGpuUnits, true, false).entry, "gemm");
  const GemmLaunch huge = gemm_launch(GemmShape{1, 65536, 65536, 64, int64_t{65536} * 65536 - 1}, true, true,
                                      kGpuUnits, kMaxGroups);
  EXPECT_EQ(huge.entry, "gemm");
  EXPECT_EQ(huge.workgroups, kMaxGroups);  // the grid is capped; invocations loop
  EXPECT_EQ(launch(5, 7, 3, kGpuUnits, false).workgroups, 1);
}

TEST(GemmLaunch, Float16ProductsTakeTheMatrixUnitsKernelWhereGiven) {
  auto half = [](int64_t m, int64_t n, const std::string& matrix_entry, bool tiled = true) {
    return gemm_launch(GemmShape{2, m, n, 64, m * 64 + 64 * n}, false, tiled, kGpuUnits, kMaxGroups, true,
                       matrix_entry);
  };
  const GemmLaunch coop = half(300, 200, "gemm_coop");
  EXPECT_EQ(coop.entry, "gemm_coop");
  EXPECT_EQ(coop.workgroups, 2 * 3 * 2);  // 128x128 tiles of each matrix of the batch
  EXPECT_EQ(half(300, 200, "gemm_coop_emulated").entry, "gemm_coop_emulated");
  EXPECT_EQ(half(300, 200, "").entry, "gemm_t64");
  EXPECT_EQ(half(4, 200, "gemm_coop").entry, "gemm");  // a few rows: no 128-row tile
  EXPECT_EQ(half(300, 200, "gemm_coop", false).entry, "gemm");
  // Never for float32 (matrix units take float16 only).
  EXPECT_EQ(gemm_launch(GemmShape{1, 300, 200, 64, 0}, true, true, kGpuUnits, kMaxGroups, false, "gemm_coop").entry,
            "gemm_t64");
  EXPECT_EQ(float16_matrix_entry(false, true), "gemm_coop_emulated");
  EXPECT_EQ(float16_matrix_entry(false, false), "");
}

TEST(GemmLaunch, SwappedScalarsDescribeTheTransposedProduct) {
  // batch, m, n, k, A (b, m, k), B (b, k, n), C (b, m, n), X (b, m, n), alpha, beta.
  const std::vector<int64_t> s = {2, 3, 5, 7, 21, 7, 1, 35, 5, 1, 15, 5, 1, 0, 0, 1, 11, 12};
  const std::vector<int64_t> t = swapped_gemm_scalars(s);
  const std::vector<int64_t> want = {2, 5, 3, 7, 35, 1, 5, 21, 1, 7, 15, 1, 5, 0, 1, 0, 11, 12};
  EXPECT_EQ(t, want);
  EXPECT_EQ(swapped_gemm_scalars(t), s);
}

}  // namespace
}  // namespace openneuron::compiler
