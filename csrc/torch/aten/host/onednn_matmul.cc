#include "torch/aten/host/onednn_matmul.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>

#include "hal/driver.h"
#include "torch/aten/host/cpu_views.h"
#include "torch/aten/host/cpu_allocation_redirect.h"
#include "torch/runtime/device.h"
#include "torch/runtime/settings.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {
namespace {

// Below about this many multiply-adds, oneDNN's primitive setup and weight
// reorder cost more than they save (measured: even at 2^21, a loss at some
// shapes; from 2^22 on, 1.3-2.5x faster than MKL).
constexpr int64_t kMinMultiplyAdds = int64_t{1} << 22;

// mkldnn::_linear_pointwise(X, W, B?, attr, scalars, algorithm?): X @ W^T + B,
// the op Inductor's mkldnn fusion calls; it takes dense weights too.
const c10::OperatorHandle* linear_op() {
  static const std::optional<c10::OperatorHandle> op =
      c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", ""});
  return op && op->hasKernelForDispatchKey(c10::DispatchKey::CPU) ? &*op : nullptr;
}

// oneDNN reads row- and column-major operands in place; other strides would
// make it (or us) copy first.
bool row_or_column_major(const at::Tensor& t) {
  return t.is_contiguous() || t.t().is_contiguous();
}

// Whether oneDNN beats MKL at a @ b laid out so. In a linear layer's layout
// (a row-major, b a row-major weight transposed) it does on any non-Intel
// x86 CPU (a Zen 3, AVX2: 1.0-1.3x, the LM head most). Otherwise it pays a
// reorder or our transpose first, which only pays off where its AVX-512
// kernels face MKL's AVX2 code path (a Zen 4: 1.3-2.5x); on a Zen 3 MKL,
// reading such operands in place, was 1.2-2x faster (weight gradients,
// input gradients). OPENNEURON_HOST_MATMUL=own takes every layout.
bool onednn_layout_wins(const at::Tensor& a, const at::Tensor& b) {
  if (a.is_contiguous() && b.t().is_contiguous()) return true;
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && settings().host_matmul != Settings::HostMatmul::Own) return false;
#endif
  return row_or_column_major(a) && row_or_column_major(b);
}

// `a` row-major: itself, or a transposed copy of a column-major `a` (oneDNN
// would copy it with ATen's one-thread copy_, several times slower).
at::Tensor row_major(const at::Tensor& a) {
  static const hal::HostKernels* kernels = hal::driver().host_kernels();
  if (a.is_contiguous()) return a;
  if (!kernels) return a.contiguous();
  at::Tensor out = at::empty(a.sizes(), a.options());
  const float* src = a.const_data_ptr<float>();
  float* dst = out.mutable_data_ptr<float>();
  const int64_t ld = a.stride(1), cols = a.size(1);
  at::parallel_for(0, a.size(0), hal::kTransposeRowGrain, [&](int64_t begin, int64_t end) {
    kernels->transpose_f32(src, ld, cols, dst, begin, end);
  });
  return out;
}

}  // namespace

// MKL, ATen's BLAS, takes its fast code paths on Intel CPUs only. On an AMD
// EPYC oneDNN measured 1.3-2.5x faster than MKL from 2^22 multiply-adds and
// the few-row kernel 2-6x faster for a decode step's products; on an Intel
// Xeon MKL matched or beat both, and reads a column-major left operand in
// place where oneDNN's linear needs it transposed first (a weight
// gradient: 10-20 % slower). There ATen's kernel is the faster route.
bool own_matmul_routes_are_faster() {
  switch (settings().host_matmul) {
    case Settings::HostMatmul::Own: return true;
    case Settings::HostMatmul::Aten: return false;
    case Settings::HostMatmul::Auto: break;
  }
#if defined(__x86_64__) || defined(__i386__)
  static const bool intel = __builtin_cpu_is("intel");
  return !intel;
#else
  return true;
#endif
}

bool plain_float_matrix(const at::Tensor& t, c10::Device device) {
  return t.defined() && t.device() == device && t.layout() == at::kStrided &&
         t.scalar_type() == at::kFloat && t.dim() == 2;
}

std::optional<at::Tensor> onednn_matmul(const at::Tensor& a, const at::Tensor& b,
                                        const at::Tensor* bias) {
  const c10::Device device = a.device();
  if (device.type() != kNeuron || !plain_float_matrix(a, device) || !plain_float_matrix(b, device))
    return std::nullopt;
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (b.size(0) != k || m * n * k < kMinMultiplyAdds) return std::nullopt;
  if (!onednn_layout_wins(a, b)) return std::nullopt;
  if (bias && !(bias->defined() && bias->device() == device && bias->scalar_type() == at::kFloat &&
                bias->dim() == 1 && bias->size(0) == n && bias->is_contiguous()))
    return std::nullopt;
  if (!at::globalContext().userEnabledMkldnn() || !own_matmul_routes_are_faster()) return std::nullopt;
  const c10::OperatorHandle* op = linear_op();
  if (!op) return std::nullopt;

  RECORD_FUNCTION("openneuron::onednn_matmul", c10::ArrayRef<const c10::IValue>{});  // which library ran
  const auto index = device.index();
  auto& queue = wait_current_stream(index);
  const at::Tensor a_rows = row_major(a);
  CpuViews views(index);
  at::Tensor cpu_out;
  {
    RedirectCpuAllocations redirect(index, &queue);  // the result is born in device memory
    torch::jit::Stack stack;
    stack.reserve(6);
    stack.emplace_back(views.to_cpu(a_rows));
    stack.emplace_back(views.to_cpu(b).t());  // W = b^T: X @ W^T = a @ b
    stack.emplace_back(bias ? c10::IValue(views.to_cpu(*bias)) : c10::IValue());
    stack.emplace_back(std::string("none"));
    stack.emplace_back(c10::List<std::optional<at::Scalar>>());
    stack.emplace_back(c10::IValue());
    op->redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
    cpu_out = stack.back().toTensor();
  }
  return views.to_neuron(cpu_out);
}

}  // namespace openneuron::integration
