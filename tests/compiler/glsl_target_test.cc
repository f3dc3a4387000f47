// The GLSL target end to end: a graph compiled for "glsl", its executable
// file read back, and its kernel run on the vulkan driver (lavapipe in CI)
// for several sizes with one build.
#if OPENNEURON_COMPILER_GLSL && OPENNEURON_HAL_VULKAN
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "compiler/codegen/glsl_gemm_coop.h"
#include "compiler/compile.h"
#include "compiler/ir/errors.h"
#include "compiler/ir/json.h"
#include "hal/drivers/vulkan/spirv_executable_file.h"
#include "hal/registry.h"

namespace openneuron::compiler {
namespace {

// softmax(x * 2) over rows of [s0, s1]: one reduction kernel (max, sum, and
// the normalised epilogue).
const char* kSoftmaxGraph = R"({
 "symbols": ["s0", "s1"],
 "inputs": [{"name": "x", "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", "s1"], "stride": ["s1", 1], "offset": 0}}],
 "nodes": [
  {"name": "m", "target": "aten.mul.Tensor", "args": [{"ref": "x"}, 2], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", "s1"], "stride": ["s1", 1], "offset": 0}},
  {"name": "mx", "target": "aten.amax.default", "args": [{"ref": "m"}, [-1], true], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", 1], "stride": [1, 1], "offset": 0}},
  {"name": "d", "target": "aten.sub.Tensor", "args": [{"ref": "m"}, {"ref": "mx"}], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", "s1"], "stride": ["s1", 1], "offset": 0}},
  {"name": "e", "target": "aten.exp.default", "args": [{"ref": "d"}], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", "s1"], "stride": ["s1", 1], "offset": 0}},
  {"name": "s", "target": "aten.sum.dim_IntList", "args": [{"ref": "e"}, [-1], true], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", 1], "stride": [1, 1], "offset": 0}},
  {"name": "y", "target": "aten.div.Tensor", "args": [{"ref": "e"}, {"ref": "s"}], "kwargs": {},
   "meta": {"t": "tensor", "dtype": "float32", "shape": ["s0", "s1"], "stride": ["s1", 1], "offset": 0}}
 ],
 "outputs": [{"ref": "y"}]
})";

TEST(GlslTarget, SoftmaxRunsOnTheVulkanDriverForAnySize) {
  setenv("OPENNEURON_VULKAN_VALIDATION", "1", 0);
  const std::string dir = ::testing::TempDir() + "/on_glsl_test_cache";
  Json plan = Json::parse(
      compile_graph(kSoftmaxGraph, R"({"target": "glsl", "cache_dir": ")" + dir + R"("})"));
  EXPECT_EQ(plan.at("target").as_string(), "glsl");
  ASSERT_EQ(plan.at("stats").at("kernels").as_int(), 1);
  const Json& step = plan.at("steps")[0];
  const std::string library = step.at("library").as_string();
  auto entries = hal::read_spirv_executable(library);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].info.name, step.at("name").as_string());
  EXPECT_EQ(entries[0].info.bindings, 2);
  EXPECT_EQ(entries[0].info.scalars, 2);

  auto driver = hal::create_driver("vulkan");
  auto exe = driver->load_executable(0, library);
  auto queue = driver->create_queue(0, 0);
  const int entry = exe->entry(step.at("name").as_string());
  // Rows longer than a workgroup, shorter, and one long row.
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {3, 300}, {100, 7}, {1, 70000}}) {
    std::vector<float> x(rows * cols), y(rows * cols);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
    void* dx = driver->allocate(0, x.size() * 4);
    void* dy = driver->allocate(0, y.size() * 4);
    queue->copy_async(dx, x.data(), x.size() * 4, hal::CopyKind::HostToDevice);
    const hal::DeviceAddress bindings[] = {dx, dy};
    const int64_t scalars[] = {rows, cols};
    queue->dispatch(*exe, entry, bindings, scalars, hal::Grid{rows, 1, 1});
    queue->copy_async(y.data(), dy, y.size() * 4, hal::CopyKind::DeviceToHost);
    queue->synchronize();
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, 2.0 * x[r * cols + c]);
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(2.0 * x[r * cols + c] - mx);
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_NEAR(y[r * cols + c], std::exp(2.0 * x[r * cols + c] - mx) / sum, 2e-6 / std::max<double>(1, cols / 1000.0))
            << rows << "x" << cols << " at " << r << "," << c;
    }
    driver->free(0, dx, x.size() * 4);
    driver->free(0, dy, y.size() * 4);
  }
}

TEST(GlslTarget, Float64TranscendentalsAreRefusedNotNarrowed) {
  const char* graph = R"({"symbols": [], "inputs": [
     {"name": "x", "meta": {"t": "tensor", "dtype": "float64", "shape": [4], "stride": [1], "offset": 0}}],
   "nodes": [{"name": "e", "target": "aten.sin.default", "args": [{"ref": "x"}], "kwargs": {},
              "meta": {"t": "tensor", "dtype": "float64", "shape": [4], "stride": [1], "offset": 0}}],
   "outputs": [{"ref": "e"}]})";
  try {
    compile_graph(graph, R"({"target": "glsl", "cache_enabled": false})");
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("float64 sin"), std::string::npos) << e.what();
  }
}

// x.t() + 1 over [rows, cols]: the kernel turns a flat index into two
// coordinates. Its divisions are 32-bit where the extent fits in 31 bits:
// chosen when compiled for constant sizes, by a branch for symbolic ones.
std::string transposed_add_source(const std::string& rows, const std::string& cols, const std::string& symbols) {
  const std::string graph = R"({"symbols": [)" + symbols + R"(], "inputs": [
     {"name": "x", "meta": {"t": "tensor", "dtype": "float32", "shape": [)" + rows + ", " + cols +
                            R"(], "stride": [)" + cols + R"(, 1], "offset": 0}}],
   "nodes": [
     {"name": "p", "target": "aten.permute.default", "args": [{"ref": "x"}, [1, 0]], "kwargs": {},
      "meta": {"t": "tensor", "dtype": "float32", "shape": [)" + cols + ", " + rows + R"(], "stride": [1, )" + cols +
                            R"(], "offset": 0}},
     {"name": "y", "target": "aten.add.Tensor", "args": [{"ref": "p"}, 1], "kwargs": {},
      "meta": {"t": "tensor", "dtype": "float32", "shape": [)" + cols + ", " + rows + R"(], "stride": [)" + rows +
                            R"(, 1], "offset": 0}}],
   "outputs": [{"ref": "y"}]})";
  Json plan = Json::parse(compile_graph(graph, R"({"target": "glsl", "cache_enabled": false, "debug": true})"));
  return plan.at("source").as_string();
}

TEST(GlslTarget, IndexDivisionsAre32BitWhereTheExtentFits) {
  const std::string symbolic = transposed_add_source(R"("s0")", R"("s1")", R"("s0", "s1")");
  EXPECT_NE(symbolic.find("<= 2147483647L) {"), std::string::npos) << symbolic;
  EXPECT_NE(symbolic.find("uint irest = uint(on_i);"), std::string::npos) << symbolic;
  EXPECT_NE(symbolic.find("int64_t irest = on_i;"), std::string::npos) << symbolic;
  const std::string small = transposed_add_source("3000", "7000", "");
  EXPECT_EQ(small.find("<= 2147483647L"), std::string::npos) << small;
  EXPECT_NE(small.find("uint irest = uint(on_i);"), std::string::npos) << small;
  EXPECT_EQ(small.find("int64_t irest"), std::string::npos) << small;
  const std::string large = transposed_add_source("70000", "70000", "");  // 4.9e9 elements
  EXPECT_EQ(large.find("uint irest"), std::string::npos) << large;
  EXPECT_NE(large.find("int64_t irest = on_i;"), std::string::npos) << large;
}

// The library carries the emulated matrix-units gemm always, and the
// cooperative-matrix one where the build compiled it (glslang >= 13): a
// SPIR-V module that declares the CooperativeMatrixKHR capability.
TEST(GlslTarget, LibraryCarriesTheCooperativeMatrixGemmWhereBuilt) {
  const std::string dir = ::testing::TempDir() + "/on_glsl_coop_cache";
  Json out = Json::parse(kernel_library(R"({"target": "glsl", "cache_dir": ")" + dir + R"("})"));
  const auto entries = hal::read_spirv_executable(out.at("library").as_string());
  const hal::SpirvEntry* emulated = nullptr;
  const hal::SpirvEntry* coop = nullptr;
  for (const auto& e : entries) {
    if (e.info.name == "gemm_coop_emulated_f16") emulated = &e;
    if (e.info.name == "gemm_coop_f16") coop = &e;
  }
  ASSERT_NE(emulated, nullptr);
  const std::vector<uint32_t>& words = glsl_coop_gemm_spirv();
  ASSERT_EQ(coop != nullptr, !words.empty());
  if (coop == nullptr) GTEST_SKIP() << "this build has no glslang >= 13: no cooperative-matrix gemm";
  EXPECT_EQ(coop->info.bindings, emulated->info.bindings);
  EXPECT_EQ(coop->info.scalars, emulated->info.scalars);
  EXPECT_EQ(coop->info.workgroup_size, emulated->info.workgroup_size);
  ASSERT_GT(coop->spirv.size(), 5u);
  EXPECT_EQ(coop->spirv[0], 0x07230203u);  // SPIR-V's magic number
  bool capability = false;  // OpCapability (2 words, opcode 17) CooperativeMatrixKHR (6022)
  for (size_t i = 5; i + 1 < coop->spirv.size(); ++i)
    capability |= coop->spirv[i] == ((2u << 16) | 17u) && coop->spirv[i + 1] == 6022u;
  EXPECT_TRUE(capability);
}

}  // namespace
}  // namespace openneuron::compiler
#endif
