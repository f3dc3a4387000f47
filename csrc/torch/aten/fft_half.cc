// torch.fft of float16 tensors, as on CUDA.
//
// The torch.fft functions are composite: they promote the input's dtype and
// call _fft_r2c/_fft_c2c/_fft_c2r. PyTorch 2.13's promotion
// (promote_type_fft in ATen/native/SpectralOps.cpp) accepts float16 only
// for CUDA (and meta) tensors, before any device kernel runs, so the
// widening of cuda_dtypes.cc never sees the call. These kernels take the
// torch.fft functions for the neuron keys: a float16 input is transformed in
// float32 and the result rounded to complex32 (or float16 for the real
// outputs of irfft/hfft), the dtypes CUDA returns; any other input runs
// PyTorch's own composite unchanged. Registered for the autograd key (the
// composite's ops record the graph, so backward works) and the backend key
// (inference mode skips the autograd key).
#include <ATen/ATen.h>
#include <ATen/ops/fft_fft2_native.h>
#include <ATen/ops/fft_fft_native.h>
#include <ATen/ops/fft_fftn_native.h>
#include <ATen/ops/fft_hfft2_native.h>
#include <ATen/ops/fft_hfft_native.h>
#include <ATen/ops/fft_hfftn_native.h>
#include <ATen/ops/fft_ifft2_native.h>
#include <ATen/ops/fft_ifft_native.h>
#include <ATen/ops/fft_ifftn_native.h>
#include <ATen/ops/fft_ihfft2_native.h>
#include <ATen/ops/fft_ihfft_native.h>
#include <ATen/ops/fft_ihfftn_native.h>
#include <ATen/ops/fft_irfft2_native.h>
#include <ATen/ops/fft_irfft_native.h>
#include <ATen/ops/fft_irfftn_native.h>
#include <ATen/ops/fft_rfft2_native.h>
#include <ATen/ops/fft_rfft_native.h>
#include <ATen/ops/fft_rfftn_native.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>
#include <torch/version.h>

static_assert(TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 13,
              "fft_half.cc works around promote_type_fft of PyTorch 2.13: check it again");

namespace openneuron::integration {
namespace {

// The composite's result, computed in float32, in the dtype CUDA gives.
at::Tensor rounded(const at::Tensor& result) {
  return result.to(result.is_complex() ? at::kComplexHalf : at::kHalf);
}

template <auto composite>
struct HalfFft;

template <class... Args, at::Tensor (*composite)(const at::Tensor&, Args...)>
struct HalfFft<composite> {
  static at::Tensor call(const at::Tensor& self, Args... args) {
    if (self.scalar_type() != at::kHalf) return composite(self, args...);
    return rounded(composite(self.to(at::kFloat), args...));
  }

  // The out= form: as ATen's, the out tensor must have the result's dtype.
  template <at::Tensor& (*composite_out)(const at::Tensor&, Args..., at::Tensor&)>
  static at::Tensor& call_out(const at::Tensor& self, Args... args, at::Tensor& out) {
    if (self.scalar_type() != at::kHalf) return composite_out(self, args..., out);
    const at::Tensor result = call(self, args...);
    TORCH_CHECK(out.scalar_type() == result.scalar_type(), "Expected out tensor to have dtype ",
                result.scalar_type(), ", but got ", out.scalar_type(), " instead");
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
    return out;
  }
};

#define OPENNEURON_FFT(name)                                                          \
  m.impl("fft_" #name, TORCH_FN(HalfFft<&at::native::fft_##name##_symint>::call));     \
  m.impl("fft_" #name ".out",                                                           \
         TORCH_FN(HalfFft<&at::native::fft_##name##_symint>::call_out<                 \
                  &at::native::fft_##name##_symint_out>));

#define OPENNEURON_FFT_FAMILY(name) \
  OPENNEURON_FFT(name)              \
  OPENNEURON_FFT(name##2)           \
  OPENNEURON_FFT(name##n)

void register_half_ffts(torch::Library& m) {
  OPENNEURON_FFT_FAMILY(fft)
  OPENNEURON_FFT_FAMILY(ifft)
  OPENNEURON_FFT_FAMILY(rfft)
  OPENNEURON_FFT_FAMILY(irfft)
  OPENNEURON_FFT_FAMILY(hfft)
  OPENNEURON_FFT_FAMILY(ihfft)
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { register_half_ffts(m); }
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { register_half_ffts(m); }

}  // namespace
}  // namespace openneuron::integration
