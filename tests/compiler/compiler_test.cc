// The compiler without PyTorch: symbolic expressions, the JSON reader, and a
// whole graph lowered, fused, generated, built and run on plain memory.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/ir/errors.h"
#include "compiler/ir/expr.h"
#include "compiler/ir/json.h"

namespace openneuron::compiler {
namespace {

TEST(Expr, SimplifiesToCanonicalForm) {
  Expr s0 = Expr::symbol("s0"), s1 = Expr::symbol("s1");
  EXPECT_EQ((s0 * 2 + s0 * 3).key(), (Expr(5) * s0).key());
  EXPECT_EQ(s1 * s0, s0 * s1);
  EXPECT_EQ(s0 + 0, s0);
  EXPECT_EQ(Expr::floordiv(s0 * s1 * 4, s1), s0 * 4);
  EXPECT_EQ(Expr::floordiv(s0 * 6 + 4, 2), s0 * 3 + 2);
  EXPECT_TRUE((s0 - s0).equals(0));
  EXPECT_EQ(Expr::floordiv(Expr(-7), Expr(2)).value(), -4);
  EXPECT_EQ(Expr::mod(Expr(-7), Expr(2)).value(), 1);
  EXPECT_EQ((s0 * s1 + 3).evaluate({{"s0", 4}, {"s1", 5}}), 23);
  EXPECT_EQ(Expr::from_json(Json::parse(R"(["add", ["mul", 2, "s0"], 1])")), s0 * 2 + 1);
  EXPECT_THROW(Expr::from_json(Json::parse(R"(["sqrt", "s0"])")), UnsupportedError);
}

TEST(Expr, MergesQuotientAndRemainderOfOneDivision) {
  // Coordinates of dims merged into one loop variable m: (m // 4, (m // 2) % 2, m % 2).
  Expr m = Expr::symbol("m"), s0 = Expr::symbol("s0");
  Expr inner = Expr::mod(m, 2), mid = Expr::mod(Expr::floordiv(m, 2), 2);
  Expr outer = Expr::floordiv(Expr::floordiv(m, 2), 2);
  EXPECT_EQ(outer * 12 + mid * 6 + inner * 3 + 5, m * 3 + 5);  // strides that span the dims
  EXPECT_EQ(outer * 4 * s0 + mid * 2 * s0 + inner * s0, m * s0);  // symbolic strides
  // Strides that do not span them keep the divisions (and their values).
  Expr transposed = outer * 12 + mid + inner * 6;
  EXPECT_NE(transposed.key().find("on_mod"), std::string::npos);
  for (int64_t v = -9; v < 17; ++v)
    EXPECT_EQ(transposed.evaluate({{"m", v}}),
              (v >= 0 ? v / 4 : -((-v + 3) / 4)) * 12 + ((v >= 0 ? v / 2 : -((-v + 1) / 2)) % 2 + 2) % 2 +
                  ((v % 2) + 2) % 2 * 6);
}

TEST(Json, RoundTripKeepsIntsAndFloatsApart) {
  Json j = Json::parse(R"({"a": 1, "b": 1.0, "c": [true, null, "x\n"], "d": -Infinity, "e": NaN})");
  EXPECT_TRUE(j.at("a").is_int());
  EXPECT_FALSE(j.at("b").is_int());
  EXPECT_TRUE(std::isinf(j.at("d").as_double()));
  Json back = Json::parse(j.dump());
  EXPECT_EQ(back.at("c")[2].as_string(), "x\n");
  EXPECT_TRUE(back.at("b").is_number() && !back.at("b").is_int());
  EXPECT_THROW(Json::parse("{\"a\": }"), CompileError);
}

// softmax(x * 2) over rows of a [s0, 5] input, written as AOTAutograd would.
const char* kSoftmaxGraph = R"({
 "symbols": ["s0"],
 "inputs": [{"name": "x", "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", 5], "stride": [5, 1], "offset": 0}}],
 "nodes": [
  {"name": "m", "target": "aten.mul.Tensor", "args": [{"ref": "x"}, 2], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", 5], "stride": [5, 1], "offset": 0}},
  {"name": "mx", "target": "aten.amax.default", "args": [{"ref": "m"}, [-1], true], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", 1], "stride": [1, 1], "offset": 0}},
  {"name": "d", "target": "aten.sub.Tensor", "args": [{"ref": "m"}, {"ref": "mx"}], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", 5], "stride": [5, 1], "offset": 0}},
  {"name": "e", "target": "aten.exp.default", "args": [{"ref": "d"}], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", 5], "stride": [5, 1], "offset": 0}},
  {"name": "s", "target": "aten.sum.dim_IntList", "args": [{"ref": "e"}, [-1], true], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", 1], "stride": [1, 1], "offset": 0}},
  {"name": "y", "target": "aten.div.Tensor", "args": [{"ref": "e"}, {"ref": "s"}], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", 5], "stride": [5, 1], "offset": 0}}
 ],
 "outputs": [{"ref": "y"}]
})";

TEST(Compile, SoftmaxFusesIntoOneKernelThatRunsForAnySize) {
  std::string dir = ::testing::TempDir() + "/on_compiler_test_cache";
  Json plan = Json::parse(compile_graph(kSoftmaxGraph, R"({"cache_dir": ")" + dir + R"("})"));
  EXPECT_EQ(plan.at("stats").at("kernels").as_int(), 1);
  const Json& step = plan.at("steps")[0];
  ASSERT_EQ(step.at("kind").as_string(), "kernel");
  void* lib = dlopen(plan.at("steps")[0].at("library").as_string().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Fn = void (*)(void**, const int64_t*, int64_t);
  auto fn = reinterpret_cast<Fn>(dlsym(lib, step.at("name").as_string().c_str()));
  ASSERT_NE(fn, nullptr);
  for (int64_t rows : {1, 3, 100}) {
    std::vector<float> x(rows * 5), y(rows * 5);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
    void* bufs[] = {x.data(), y.data()};
    int64_t syms[] = {rows};
    fn(bufs, syms, 2);
    for (int64_t r = 0; r < rows; ++r) {
      float mx = -INFINITY, sum = 0;
      for (int c = 0; c < 5; ++c) mx = std::max(mx, 2 * x[r * 5 + c]);
      for (int c = 0; c < 5; ++c) sum += std::exp(2 * x[r * 5 + c] - mx);
      for (int c = 0; c < 5; ++c) EXPECT_NEAR(y[r * 5 + c], std::exp(2 * x[r * 5 + c] - mx) / sum, 1e-6);
    }
  }
  // The entry's metadata beside it, as the HAL's CPU drivers read it.
  const auto* info = static_cast<const int64_t*>(dlsym(lib, (step.at("name").as_string() + "_info").c_str()));
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info[0], 2);  // bindings: x, y
  EXPECT_EQ(info[1], 1);  // scalars: rows
  // The target and the launch grid are in the plan.
  EXPECT_EQ(plan.at("target").as_string(), "cpp");
  EXPECT_EQ(step.at("grid").size(), 3u);
  dlclose(lib);
  // The same graph again: a cache hit.
  Json again = Json::parse(compile_graph(kSoftmaxGraph, R"({"cache_dir": ")" + dir + R"("})"));
  EXPECT_TRUE(again.at("cache").at("hit").as_bool());
}

TEST(Compile, UnknownTargetNamesTheKnownOnes) {
  try {
    compile_graph(kSoftmaxGraph, R"({"cache_enabled": false, "target": "fpga"})");
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("'fpga'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'cpp'"), std::string::npos) << e.what();
  }
}

TEST(Compile, UnknownOpsBecomeExternSteps) {
  const char* graph = R"({"symbols": [], "inputs": [
    {"name": "a", "meta": {"t": "tensor", "dtype": "float32", "shape": [2, 3], "stride": [3, 1], "offset": 0}},
    {"name": "b", "meta": {"t": "tensor", "dtype": "float32", "shape": [3, 4], "stride": [4, 1], "offset": 0}}],
   "nodes": [{"name": "mm", "target": "aten.mm.default", "args": [{"ref": "a"}, {"ref": "b"}], "kwargs": {},
              "meta": {"t": "tensor", "dtype": "float32", "shape": [2, 4], "stride": [4, 1], "offset": 0}},
             {"name": "r", "target": "aten.relu.default", "args": [{"ref": "mm"}], "kwargs": {},
              "meta": {"t": "tensor", "dtype": "float32", "shape": [2, 4], "stride": [4, 1], "offset": 0}}],
   "outputs": [{"ref": "r"}]})";
  Json plan = Json::parse(compile_graph(graph, R"({"cache_enabled": false})"));
  ASSERT_EQ(plan.at("steps").size(), 2u);
  EXPECT_EQ(plan.at("steps")[0].at("kind").as_string(), "extern");
  EXPECT_EQ(plan.at("steps")[1].at("kind").as_string(), "kernel");
  EXPECT_EQ(plan.at("fallbacks").size(), 0u);
}

// float exp as generated kernels compute it (the prelude's inline polynomial)
// against float64 exp: within 1 ulp from underflow to overflow, and the
// special values as ATen gives them.
TEST(Compile, GeneratedFloatExpIsWithinOneUlp) {
  const char* graph = R"({"symbols": ["s0"], "inputs": [
    {"name": "x", "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0"], "stride": [1], "offset": 0}}],
   "nodes": [{"name": "e", "target": "aten.exp.default", "args": [{"ref": "x"}], "kwargs": {},
              "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0"], "stride": [1], "offset": 0}}],
   "outputs": [{"ref": "e"}]})";
  Json plan = Json::parse(compile_graph(graph, R"({"cache_enabled": false})"));
  ASSERT_EQ(plan.at("steps").size(), 1u);
  void* lib = dlopen(plan.at("steps")[0].at("library").as_string().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Fn = void (*)(void**, const int64_t*, int64_t);
  auto fn = reinterpret_cast<Fn>(dlsym(lib, plan.at("steps")[0].at("name").as_string().c_str()));
  ASSERT_NE(fn, nullptr);
  std::vector<float> x;
  for (float v = -110.0f; v < 90.0f; v = std::nextafter(v + std::fabs(v) * 1e-5f + 1e-30f, 100.0f)) x.push_back(v);
  const float specials[] = {0.0f,    -0.0f,  INFINITY, -INFINITY, NAN,     88.72283f, 88.72284f, -87.33655f,
                            -103.97f, -104.5f, 1e30f,    -1e30f,    3e9f,    -3e9f,     FLT_MAX,   -FLT_MAX};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  std::vector<float> y(x.size());
  void* bufs[] = {x.data(), y.data()};
  int64_t syms[] = {static_cast<int64_t>(x.size())};
  fn(bufs, syms, 2);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x[i])));
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    if (std::isinf(want) || want == 0.0f || std::isinf(y[i])) {
      EXPECT_EQ(y[i], want) << "exp(" << x[i] << ")";
      continue;
    }
    const double ulp = std::nextafter(want, INFINITY) - want;
    worst = std::max(worst, std::fabs(static_cast<double>(y[i]) - std::exp(static_cast<double>(x[i]))) / ulp);
  }
  EXPECT_LE(worst, 1.0) << x.size() << " values";
  dlclose(lib);
}

}  // namespace
}  // namespace openneuron::compiler
