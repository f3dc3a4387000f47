// Kernels are built once per distinct content: within a graph (identical
// layers), across graphs and across processes (the persistent cache).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/ir/json.h"

namespace openneuron::compiler {
namespace {

std::string tensor_meta() {
  return R"({"t": "tensor", "dtype": "float32", "shape": ["s0", 5], "stride": [5, 1], "offset": 0})";
}

// `layers` times: h = softmax(mm(h, w) * 2) over rows of [s0, 5]; the matmul
// (an extern) keeps each layer's softmax a kernel of its own. `distinct`:
// layer i scales by i + 2 instead, so no two layers' kernels are equal.
std::string layered_graph(int layers, bool distinct = false) {
  std::string nodes, h = "x";
  auto node = [&](const std::string& name, const std::string& target, const std::string& args,
                  const std::string& meta) {
    nodes += std::string(nodes.empty() ? "" : ",\n") + R"({"name": ")" + name + R"(", "target": ")" + target +
             R"(", "args": )" + args + R"(, "kwargs": {}, "meta": )" + meta + "}";
  };
  const std::string row = R"({"t": "tensor", "dtype": "float32", "shape": ["s0", 1], "stride": [1, 1], "offset": 0})";
  for (int i = 0; i < layers; ++i) {
    const std::string l = std::to_string(i);
    node("p" + l, "aten.mm.default", R"([{"ref": ")" + h + R"("}, {"ref": "w"}])", tensor_meta());
    node("m" + l, "aten.mul.Tensor", R"([{"ref": "p)" + l + R"("}, )" + std::to_string(distinct ? i + 2 : 2) + "]", tensor_meta());
    node("a" + l, "aten.amax.default", R"([{"ref": "m)" + l + R"("}, [-1], true])", row);
    node("d" + l, "aten.sub.Tensor", R"([{"ref": "m)" + l + R"("}, {"ref": "a)" + l + R"("}])", tensor_meta());
    node("e" + l, "aten.exp.default", R"([{"ref": "d)" + l + R"("}])", tensor_meta());
    node("s" + l, "aten.sum.dim_IntList", R"([{"ref": "e)" + l + R"("}, [-1], true])", row);
    node("y" + l, "aten.div.Tensor", R"([{"ref": "e)" + l + R"("}, {"ref": "s)" + l + R"("}])", tensor_meta());
    h = "y" + l;
  }
  return R"({"symbols": ["s0"], "inputs": [{"name": "x", "meta": )" + tensor_meta() +
         R"(}, {"name": "w", "meta": {"t": "tensor", "dtype": "float32", "shape": [5, 5], "stride": [5, 1], "offset": 0}}],
  "nodes": [)" + nodes + R"(], "outputs": [{"ref": ")" + h + R"("}]})";
}

std::string options(const std::string& dir) { return R"({"cache_dir": ")" + dir + R"("})"; }

std::set<std::string> kernel_names(const Json& plan) {
  std::set<std::string> names;
  for (const auto& st : plan.at("steps").items())
    if (st.at("kind").as_string() == "kernel") names.insert(st.at("name").as_string());
  return names;
}

TEST(KernelBuilds, IdenticalLayersShareOneKernel) {
  const std::string dir = ::testing::TempDir() + "/on_kernel_builds_layers";
  std::filesystem::remove_all(dir);
  Json plan = Json::parse(compile_graph(layered_graph(4), options(dir)));
  EXPECT_EQ(plan.at("stats").at("kernels").as_int(), 4);
  EXPECT_EQ(plan.at("stats").at("kernels_distinct").as_int(), 1);
  EXPECT_EQ(plan.at("stats").at("kernels_built").as_int(), 1);
  EXPECT_EQ(kernel_names(plan).size(), 1u);
  // The shared kernel runs each layer correctly.
  const Json& step = plan.at("steps")[1];
  ASSERT_EQ(step.at("kind").as_string(), "kernel");
  void* lib = dlopen(step.at("library").as_string().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto fn = reinterpret_cast<void (*)(void**, const int64_t*, int64_t)>(dlsym(lib, step.at("name").as_string().c_str()));
  ASSERT_NE(fn, nullptr);
  std::vector<float> x(15), y(15);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(static_cast<float>(i));
  void* bufs[] = {x.data(), y.data()};
  const int64_t syms[] = {3};
  fn(bufs, syms, 1);
  for (int r = 0; r < 3; ++r) {
    float mx = -INFINITY, sum = 0;
    for (int c = 0; c < 5; ++c) mx = std::max(mx, 2 * x[r * 5 + c]);
    for (int c = 0; c < 5; ++c) sum += std::exp(2 * x[r * 5 + c] - mx);
    for (int c = 0; c < 5; ++c) EXPECT_NEAR(y[r * 5 + c], std::exp(2 * x[r * 5 + c] - mx) / sum, 1e-6);
  }
  dlclose(lib);
}

TEST(KernelBuilds, AnotherGraphFindsTheKernelsAlreadyBuilt) {
  const std::string dir = ::testing::TempDir() + "/on_kernel_builds_graphs";
  std::filesystem::remove_all(dir);
  Json first = Json::parse(compile_graph(layered_graph(2), options(dir)));
  EXPECT_FALSE(first.at("cache").at("hit").as_bool());
  EXPECT_NE(first.at("cache").at("miss_reason").as_string(), "");
  // A deeper model: another graph, the same layer kernel, nothing built.
  Json second = Json::parse(compile_graph(layered_graph(5), options(dir)));
  EXPECT_EQ(second.at("stats").at("kernels_built").as_int(), 0);
  EXPECT_EQ(second.at("stats").at("kernels_found").as_int(), 1);
  EXPECT_TRUE(second.at("cache").at("hit").as_bool());
  EXPECT_EQ(kernel_names(first), kernel_names(second));
  EXPECT_EQ(first.at("steps")[1].at("library").as_string(), second.at("steps")[1].at("library").as_string());
}

TEST(KernelBuilds, ALostLibraryIsBuiltAgain) {
  const std::string dir = ::testing::TempDir() + "/on_kernel_builds_lost";
  std::filesystem::remove_all(dir);
  Json first = Json::parse(compile_graph(layered_graph(2), options(dir)));
  const std::string digest = first.at("libraries")[0].at("source_digest").as_string();
  // The library's entry evicted; the kernel's entry naming it is still there.
  std::filesystem::path library = first.at("steps")[1].at("library").as_string();
  std::filesystem::remove(library);
  std::filesystem::remove(std::filesystem::path(library).replace_extension(".meta"));
  Json again = Json::parse(compile_graph(layered_graph(3), options(dir)));
  EXPECT_EQ(again.at("stats").at("kernels_built").as_int(), 1);
  EXPECT_NE(again.at("cache").at("miss_reason").as_string().find("gone"), std::string::npos)
      << again.at("cache").at("miss_reason").as_string();
  EXPECT_EQ(again.at("libraries")[0].at("source_digest").as_string(), digest);
}

TEST(KernelBuilds, ManyDistinctKernelsBuildInParallelBatches) {
  const std::string dir = ::testing::TempDir() + "/on_kernel_builds_batches";
  std::filesystem::remove_all(dir);
  Json plan = Json::parse(compile_graph(layered_graph(40, true), R"({"cache_dir": ")" + dir + R"(", "build_threads": 2})"));
  EXPECT_GE(plan.at("stats").at("kernels_distinct").as_int(), 16);
  EXPECT_EQ(plan.at("stats").at("kernels_built").as_int(), plan.at("stats").at("kernels_distinct").as_int());
  EXPECT_EQ(plan.at("libraries").size(), 2u);  // two batches, built at once
  // Every kernel step names a library that has its entry point.
  for (const auto& st : plan.at("steps").items()) {
    if (st.at("kind").as_string() != "kernel") continue;
    void* lib = dlopen(st.at("library").as_string().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    EXPECT_NE(dlsym(lib, st.at("name").as_string().c_str()), nullptr) << st.at("name").as_string();
    dlclose(lib);
  }
}

}  // namespace
}  // namespace openneuron::compiler
