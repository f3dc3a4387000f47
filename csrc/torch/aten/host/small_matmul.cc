// mm and addmm on neuron. Products with few rows (a decode step's tokens
// times a weight matrix: linear layers, the LM head) run the host driver's
// small-GEMM kernel, which reads each weight element once; BLAS libraries
// tune for many rows and take several times as long here. Large float32
// products run through oneDNN (onednn_matmul.h). Both only where they beat
// ATen's MKL (not on Intel CPUs). Every other call takes the direct route
// to ATen's CPU kernel like any other op.
#include "torch/aten/host/direct_route.h"  // first: the op headers need its includes

#include <ATen/Parallel.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm_ops.h>

#include "hal/driver.h"
#include "torch/aten/host/onednn_matmul.h"

namespace openneuron::integration {
namespace {

using hal::SmallGemmF32;
using MmRoute = direct::Kernel<at::_ops::mm, at::_ops::mm::schema>;
using AddmmRoute = direct::Kernel<at::_ops::addmm, at::_ops::addmm::schema>;

// The driver's host kernels (the host driver lends them; null elsewhere).
const hal::HostKernels* host_kernels() {
  static const hal::HostKernels* kernels = hal::driver().host_kernels();
  return kernels;
}

// The product a @ b as the kernel takes it, when the kernel applies. A
// dimension of size 1 gets stride 1 (its stride is arbitrary).
std::optional<SmallGemmF32> small_product(const at::Tensor& a, const at::Tensor& b) {
  const auto device = a.device();
  if (!host_kernels() || device.type() != kNeuron || !plain_float_matrix(a, device) ||
      !plain_float_matrix(b, device) || a.size(1) != b.size(0))
    return std::nullopt;  // the direct route computes it or reports the error
  SmallGemmF32 g;
  g.m = a.size(0);
  g.k = a.size(1);
  g.n = b.size(1);
  if (g.k > 1 && a.stride(1) != 1) return std::nullopt;
  g.a = a.const_data_ptr<float>();
  g.a_row_stride = a.stride(0);
  g.b = b.const_data_ptr<float>();
  g.b_k_stride = g.k == 1 ? 1 : b.stride(0);
  g.b_n_stride = g.n == 1 ? 1 : b.stride(1);
  if (!host_kernels()->small_gemm_applies(g) || !own_matmul_routes_are_faster()) return std::nullopt;
  return g;
}

// A fresh [m, n] result, computed on the calling thread after the stream's
// queued work, as the direct route runs CPU kernels.
at::Tensor run(SmallGemmF32 g, const at::Tensor& like) {
  wait_current_stream(like.device().index());
  at::Tensor out = at::empty({g.m, g.n}, like.options());
  g.c = out.mutable_data_ptr<float>();
  g.c_row_stride = g.n;
  const hal::HostKernels& kernels = *host_kernels();
  at::parallel_for(0, g.n, kernels.small_gemm_column_grain(g), [&](int64_t begin, int64_t end) {
    kernels.small_gemm_f32(g, begin, end);
  });
  return out;
}

at::Tensor neuron_mm(c10::DispatchKeySet keys, const at::Tensor& self, const at::Tensor& mat2) {
  if (MmRoute::facts().direct.load(std::memory_order_relaxed)) {
    if (auto g = small_product(self, mat2)) return run(*g, self);
    if (auto out = onednn_matmul(self, mat2)) return *out;
  }
  return MmRoute::call(keys, self, mat2);
}

// addmm's self broadcast to [m, n]: the strides of its expanded view.
bool broadcast_strides(const at::Tensor& bias, int64_t m, int64_t n, SmallGemmF32& g) {
  if (bias.dim() > 2) return false;
  const int64_t bm = bias.dim() == 2 ? bias.size(0) : 1;
  const int64_t bn = bias.dim() >= 1 ? bias.size(-1) : 1;
  if ((bm != 1 && bm != m) || (bn != 1 && bn != n)) return false;
  g.bias_m_stride = bm == 1 ? 0 : bias.stride(0);
  g.bias_n_stride = bn == 1 ? 0 : bias.stride(-1);
  return true;
}

at::Tensor neuron_addmm(c10::DispatchKeySet keys, const at::Tensor& self,
                        const at::Tensor& mat1, const at::Tensor& mat2,
                        const c10::Scalar& beta, const c10::Scalar& alpha) {
  const bool plain_bias = self.defined() && self.device() == mat1.device() &&
                          self.layout() == at::kStrided &&
                          self.scalar_type() == at::kFloat;
  if (plain_bias && !beta.isComplex() && !alpha.isComplex() &&
      AddmmRoute::facts().direct.load(std::memory_order_relaxed)) {
    if (auto g = small_product(mat1, mat2); g && broadcast_strides(self, g->m, g->n, *g)) {
      g->bias = self.const_data_ptr<float>();
      g->beta = beta.to<float>();
      g->alpha = alpha.to<float>();
      return run(*g, mat1);
    }
    // A linear layer's addmm(bias, x, w^T): oneDNN adds the bias itself.
    if (self.dim() == 1 && beta.toDouble() == 1.0 && alpha.toDouble() == 1.0)
      if (auto out = onednn_matmul(mat1, mat2, &self)) return *out;
  }
  return AddmmRoute::call(keys, self, mat1, mat2, beta, alpha);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", TORCH_FN(neuron_mm));
  m.impl("addmm", TORCH_FN(neuron_addmm));
}

}  // namespace
}  // namespace openneuron::integration
