#include "torch/aten/eager/library_kernels.h"

#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <vector>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "compiler/codegen/gemm_launch.h"
#include "compiler/compile.h"
#include "compiler/ir/json.h"
#include "hal/driver.h"
#include "hal/error.h"
#include "torch/aten/eager/eager_kernel.h"
#include "torch/aten/eager/kernel_geometry.h"
#include "torch/aten/eager/tensor_alias.h"
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


}  // namespace

const char* library_type_suffix(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "f32";
    case at::kDouble: return "f64";
    case at::kLong: return "i64";
    case at::kInt: return "i32";
    case at::kShort: return "i16";
    case at::kChar: return "i8";
    case at::kByte: return "u8";
    default: return nullptr;
  }
}

int64_t double_bits(double v) {
  int64_t out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}

c10::ArrayRef<c10::IValue> op_args(const c10::OperatorHandle& op, const torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  return c10::ArrayRef<c10::IValue>(stack->data() + stack->size() - n, n);
}

std::string op_full_name(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  return schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
}

void finish_op(torch::jit::Stack* stack, size_t num_args, std::vector<at::Tensor> results) {
  torch::jit::drop(*stack, num_args);
  for (auto& r : results) stack->emplace_back(std::move(r));
}

bool loops_fit(c10::DeviceIndex device, int64_t trips) {
  const int64_t limit = hal::driver().properties(device).max_loop_trips;
  return limit == 0 || trips < limit - 64;  // room for the kernel's other loops
}

int64_t library_kernel(c10::DeviceIndex device, const std::string& entry) {
  const std::string path = library_path(hal::driver().properties(device).kernel_target);
  if (path.empty()) return -1;
  // A target's library may lack an entry the C++ target has (the GLSL
  // library has no indexing kernels yet): the op then takes another route.
  static std::mutex mutex;
  static auto* missing = new std::set<std::pair<std::string, std::string>>();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (missing->count({path, entry})) return -1;
  }
  try {
    return compiled_kernel(path, entry, device, "library kernel: " + entry);
  } catch (const hal::Error&) {
    std::lock_guard<std::mutex> lock(mutex);
    missing->insert({path, entry});
    return -1;
  }
}

namespace {

// `t`'s memory seen with other sizes and strides (no dispatch: a matrix
// view of a vector for the gemm).
at::Tensor viewed(const at::Tensor& t, c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  return alias_with(t, sizes, strides, t.storage_offset());
}

// The gemm C = alpha A B + beta X on 2-d or 3-d (batched) operands; X
// seen in C's shape (broadcast strides allowed).
bool gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, const at::Tensor& x,
          const std::vector<int64_t>& x_strides, double alpha, double beta, c10::DeviceIndex device) {
  const at::ScalarType dtype = out.scalar_type();
  const bool sixteen_bit = dtype == at::kHalf || dtype == at::kBFloat16;  // the GLSL library's, computed in float
  if (dtype != at::kFloat && dtype != at::kDouble && !sixteen_bit) return false;
  if (a.scalar_type() != dtype || b.scalar_type() != dtype || (beta != 0 && x.scalar_type() != dtype)) return false;
  // A device without float64 kernels runs float64 products on the CPU (never narrowed).
  if (dtype == at::kDouble && !hal::driver().properties(device).native_fp64) return false;
  const std::string suffix = dtype == at::kFloat    ? "_f32"
                             : dtype == at::kDouble ? "_f64"
                             : dtype == at::kHalf   ? "_f16"
                                                    : "_bf16";
  if (out.numel() == 0) return library_kernel(device, "gemm" + suffix) >= 0;
  const bool batched = out.dim() == 3;
  // Strides (b, m, k) of each operand; 0 for the batch of 2-d products.
  auto strides3 = [&](const at::Tensor& t) {
    return batched ? std::vector<int64_t>{t.stride(0), t.stride(1), t.stride(2)}
                   : std::vector<int64_t>{0, t.stride(0), t.stride(1)};
  };
  const std::vector<int64_t> sa = strides3(a), sb = strides3(b), sc = strides3(out);
  const std::vector<int64_t> sx =
      beta == 0 ? sc : batched ? x_strides : std::vector<int64_t>{0, x_strides[0], x_strides[1]};
  const int64_t batch = batched ? out.size(0) : 1;
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  std::vector<int64_t> scalars = {batch, m, n, k, sa[0], sa[1], sa[2], sb[0], sb[1], sb[2],
                                  sc[0], sc[1], sc[2], sx[0], sx[1], sx[2], double_bits(alpha), double_bits(beta)};
  // The GLSL library picks its kernel and grid from the device and the
  // shape (a GPU's tiled kernels); the C++ library has one gemm.
  const hal::DeviceProperties& props = hal::driver().properties(device);
  compiler::GemmLaunch launch{"gemm", 0};
  if (props.kernel_target != "cpp") {
    compiler::GemmShape shape{batch, m, n, k, 0};
    auto last = [](int64_t rows, int64_t cols, int64_t s_row, int64_t s_col) {
      return (rows - 1) * s_row + (cols - 1) * s_col;
    };
    shape.largest_offset = std::max({last(m, k, sa[1], sa[2]), last(k, n, sb[1], sb[2]), last(m, n, sc[1], sc[2]),
                                      beta == 0 ? 0 : last(m, n, sx[1], sx[2])});
    using MatrixUnits = hal::DeviceProperties::MatrixUnits;
    const std::string matrix_entry =
        dtype != at::kHalf ? ""
                           : compiler::float16_matrix_entry(props.matrix_units == MatrixUnits::kCooperative,
                                                            props.matrix_units == MatrixUnits::kEmulated);
    launch = compiler::gemm_launch(shape, dtype == at::kFloat, props.tiled_kernels, props.compute_units,
                                   props.max_workgroups, sixteen_bit, matrix_entry);
  }
  const int64_t kernel = library_kernel(device, launch.entry + suffix);
  if (kernel < 0) return false;
  const bool swap = launch.swap_operands;  // C^T = B^T A^T
  launch_compiled_kernel(kernel, {swap ? b : a, swap ? a : b, out, beta == 0 ? out : x},
                         swap ? compiler::swapped_gemm_scalars(scalars) : scalars, launch.workgroups);
  return true;
}

std::vector<int64_t> broadcast_to(const at::Tensor& x, c10::IntArrayRef shape) {
  return broadcast_strides(shape.vec(), x.sizes().data(), x.strides().data(), x.dim());
}

}  // namespace

bool run_matmul(const EagerOp& op, c10::ArrayRef<c10::IValue> args, const at::Tensor& out,
                c10::DeviceIndex device) {
  const std::string& t = op.target;
  auto tensor = [&](int i) { return args[i].toTensor(); };
  auto scalar = [&](int i) { return args[i].toScalar().toDouble(); };
  if (t == "aten.mv.default" || t == "aten.addmv.default") {  // [m, k] x [k, 1] (+ beta self)
    const bool adds = t == "aten.addmv.default";
    const at::Tensor a = tensor(adds ? 1 : 0), v = tensor(adds ? 2 : 1);
    const at::Tensor c = viewed(out, {out.size(0), 1}, {out.stride(0), 0});
    const double beta = adds ? scalar(3) : 0.0;
    std::vector<int64_t> sx;
    if (beta != 0) sx = {broadcast_to(tensor(0), out.sizes())[0], 0};
    return gemm(a, viewed(v, {v.size(0), 1}, {v.stride(0), 0}), c, adds ? tensor(0) : out, sx,
                adds ? scalar(4) : 1.0, beta, device);
  }
  if (t == "aten.addr.default") {  // [m, 1] x [1, n] + beta self
    const at::Tensor u = tensor(1), w = tensor(2);
    const double beta = scalar(3);
    return gemm(viewed(u, {u.size(0), 1}, {u.stride(0), 0}), viewed(w, {1, w.size(0)}, {0, w.stride(0)}), out,
                tensor(0), beta != 0 ? broadcast_to(tensor(0), out.sizes()) : std::vector<int64_t>{}, scalar(4),
                beta, device);
  }
  // mm, bmm, addmm, baddbmm: [self (the added term),] A, B [, beta, alpha].
  const bool adds = t.rfind("aten.addmm", 0) == 0 || t.rfind("aten.baddbmm", 0) == 0;
  const double beta = adds ? scalar(3) : 0.0;
  std::vector<int64_t> sx;
  if (adds && beta != 0) sx = broadcast_to(tensor(0), out.sizes());
  return gemm(tensor(adds ? 1 : 0), tensor(adds ? 2 : 1), out, adds ? tensor(0) : out, sx,
              adds ? scalar(4) : 1.0, beta, device);
}

}  // namespace openneuron::integration
