// The host driver's small-GEMM kernel against a float64 reference, over
// both layouts of B, tails, bias broadcasts and scaling; and its arithmetic
// does not depend on how the columns are split across threads.
#include "hal/drivers/host/kernels/small_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace openneuron::hal::host {
namespace {

struct Case {
  int64_t m, n, k;
  bool dot_layout;  // B given as rows of B^T (b_k_stride == 1)
};

class SmallGemmTest : public ::testing::TestWithParam<Case> {};

std::vector<float> random_values(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(count);
  for (auto& x : v) x = normal(rng);
  return v;
}

TEST_P(SmallGemmTest, MatchesFloat64ReferenceAndIgnoresSplits) {
  const Case c = GetParam();
  const int64_t padded_k = c.k + 3, padded_n = c.n + 5;  // row strides wider than the rows
  auto a = random_values(c.m * padded_k, 1);
  auto b = random_values(padded_k * padded_n, 2);
  auto bias = random_values(c.n, 3);  // one row, broadcast over m
  SmallGemmF32 g;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.a = a.data();
  g.a_row_stride = padded_k;
  g.b = b.data();
  g.b_k_stride = c.dot_layout ? 1 : padded_n;
  g.b_n_stride = c.dot_layout ? padded_k : 1;
  g.bias = bias.data();
  g.bias_m_stride = 0;
  g.bias_n_stride = 1;
  g.alpha = 0.5f;
  g.beta = 2.0f;
  std::vector<float> whole(c.m * c.n), split(c.m * c.n, -1.0f);
  g.c = whole.data();
  g.c_row_stride = c.n;
  small_gemm_f32(g, 0, c.n);
  g.c = split.data();
  for (int64_t begin = 0; begin < c.n; begin += 37)  // uneven chunks
    small_gemm_f32(g, begin, std::min(c.n, begin + 37));

  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t n = 0; n < c.n; ++n) {
      double dot = 0, magnitude = 0;
      for (int64_t k = 0; k < c.k; ++k) {
        const double x = a[m * padded_k + k];
        const double y = b[k * g.b_k_stride + n * g.b_n_stride];
        dot += x * y;
        magnitude += std::abs(x * y);
      }
      const double expected = 0.5 * dot + 2.0 * bias[n];
      const double tolerance = 1e-6 * (magnitude + std::abs(bias[n])) + 1e-7;
      ASSERT_NEAR(whole[m * c.n + n], expected, tolerance) << "m " << m << " n " << n;
      ASSERT_EQ(whole[m * c.n + n], split[m * c.n + n]) << "m " << m << " n " << n;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SmallGemmTest,
    ::testing::Values(Case{1, 300, 256, true}, Case{2, 129, 130, true},
                      Case{3, 64, 1000, true}, Case{8, 77, 517, true},
                      Case{1, 1, 200, true}, Case{1, 300, 256, false},
                      Case{2, 130, 77, false}, Case{6, 65, 3, false},
                      Case{4, 200, 1, false}, Case{5, 31, 0, false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return "m" + std::to_string(c.m) + "_n" + std::to_string(c.n) + "_k" +
             std::to_string(c.k) + (c.dot_layout ? "_dot" : "_rows");
    });

TEST(SmallGemm, BetaZeroIgnoresBias) {
  std::vector<float> a(2 * 4, 1.0f), b(4 * 20, 1.0f), c(2 * 20);
  std::vector<float> bias(20, std::nanf(""));
  SmallGemmF32 g;
  g.m = 2, g.n = 20, g.k = 4;
  g.a = a.data(), g.a_row_stride = 4;
  g.b = b.data(), g.b_k_stride = 20, g.b_n_stride = 1;
  g.c = c.data(), g.c_row_stride = 20;
  g.bias = bias.data(), g.bias_n_stride = 1;
  g.beta = 0.0f;
  small_gemm_f32(g, 0, 20);
  for (float x : c) EXPECT_EQ(x, 4.0f);
}

TEST(SmallGemm, AppliesToFewRowsOnly) {
  SmallGemmF32 g;
  g.n = 8000, g.k = 256, g.b_k_stride = 1, g.b_n_stride = 256;  // x @ W.t()
  g.m = 2;
  EXPECT_TRUE(small_gemm_applies(g));
  g.m = 9;
  EXPECT_FALSE(small_gemm_applies(g));
  g.m = 2, g.b_k_stride = 3;  // neither stride 1
  EXPECT_FALSE(small_gemm_applies(g));
  g.b_k_stride = 1, g.n = 40;  // a small B stays with the BLAS
  EXPECT_FALSE(small_gemm_applies(g));
}

}  // namespace
}  // namespace openneuron::hal::host
