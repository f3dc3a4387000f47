#include "torch/aten/eager/library_kernels.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <map>
#include <mutex>

#include "compiler/compile.h"
#include "compiler/ir/json.h"
#include "hal/driver.h"
#include "torch/aten/eager/eager_kernel.h"
#include "torch/aten/eager/kernel_geometry.h"
#include "torch/runtime/compiled_kernels.h"

namespace openneuron::integration {
namespace {

// The library's path for a kernel target ("" when it has none).
std::string library_path(const std::string& target) {
  static std::mutex mutex;
  static auto* paths = new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = paths->find(target);
  if (it != paths->end()) return it->second;
  std::string path;
  try {
    compiler::Json r = compiler::Json::parse(compiler::kernel_library(compile_options(target)));
    if (r.at("library").is_string()) path = r.at("library").as_string();
  } catch (const std::exception& e) {
    TORCH_WARN("neuron: the kernel library of target ", target, " failed to build (", e.what(),
               "); matmuls run through the CPU fallback instead.");
  }
  return (*paths)[target] = path;
}

int64_t bits(double v) {
  int64_t out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

}  // namespace

int64_t library_kernel(c10::DeviceIndex device, const std::string& entry) {
  const std::string path = library_path(hal::driver().properties(device).kernel_target);
  if (path.empty()) return -1;
  return compiled_kernel(path, entry, device, "library kernel: " + entry);
}

bool run_matmul(const EagerOp& op, c10::ArrayRef<c10::IValue> args, const at::Tensor& out,
                c10::DeviceIndex device) {
  const at::ScalarType dtype = out.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) return false;
  // The arguments: [self (the added term),] A, B [, beta, alpha].
  const bool adds = op.target.rfind("aten.addmm", 0) == 0 || op.target.rfind("aten.baddbmm", 0) == 0;
  const at::Tensor& a = args[adds ? 1 : 0].toTensor();
  const at::Tensor& b = args[adds ? 2 : 1].toTensor();
  if (a.scalar_type() != dtype || b.scalar_type() != dtype) return false;
  const double beta = adds ? args[3].toScalar().toDouble() : 0.0;
  const double alpha = adds ? args[4].toScalar().toDouble() : 1.0;
  const int64_t kernel = library_kernel(device, dtype == at::kFloat ? "gemm_f32" : "gemm_f64");
  if (kernel < 0) return false;
  if (out.numel() == 0) return true;
  const bool batched = out.dim() == 3;
  // Strides (b, m, k) of each operand; 0 for the batch of 2-d products.
  auto strides3 = [&](const at::Tensor& t) {
    return batched ? std::vector<int64_t>{t.stride(0), t.stride(1), t.stride(2)}
                   : std::vector<int64_t>{0, t.stride(0), t.stride(1)};
  };
  const std::vector<int64_t> sa = strides3(a), sb = strides3(b), sc = strides3(out);
  std::vector<int64_t> sx = sc;
  at::Tensor x = out;
  if (adds && beta != 0) {  // the added term, broadcast to the output
    x = args[0].toTensor();
    if (x.scalar_type() != dtype) return false;
    const std::vector<int64_t> shape = out.sizes().vec();
    std::vector<int64_t> s = broadcast_strides(shape, x.sizes().data(), x.strides().data(), x.dim());
    sx = batched ? s : std::vector<int64_t>{0, s[0], s[1]};
  }
  const int64_t batch = batched ? out.size(0) : 1;
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  std::vector<int64_t> scalars = {batch, m, n, k, sa[0], sa[1], sa[2], sb[0], sb[1], sb[2],
                                  sc[0], sc[1], sc[2], sx[0], sx[1], sx[2], bits(alpha), bits(beta)};
  launch_compiled_kernel(kernel, {a, b, out, x}, scalars);
  return true;
}

}  // namespace openneuron::integration
