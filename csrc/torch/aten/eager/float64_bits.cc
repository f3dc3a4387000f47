#include "torch/aten/eager/float64_bits.h"

#include <ATen/ATen.h>

#include <cstring>
#include <string>

#include "hal/driver.h"
#include "torch/aten/eager/eager_kernel.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {

bool float64_without_shaders(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == at::kDouble && t.device().type() == kNeuron && !t.is_conj() &&
         !t.is_neg() && !hal::driver().properties(t.device().index()).native_fp64;
}

bool run_float64_as_bits(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const std::string& name = schema.name();
  const std::string& overload = schema.overload_name();
  const size_t n = schema.arguments().size();
  c10::ArrayRef<c10::IValue> args(stack->data() + stack->size() - n, n);
  if (!args[0].isTensor() || !float64_without_shaders(args[0].toTensor())) return false;
  at::Tensor self = args[0].toTensor();
  at::Tensor result;
  if (name == "aten::copy_" && overload.empty()) {
    if (!args[1].isTensor()) return false;
    const at::Tensor& src = args[1].toTensor();
    if (!float64_without_shaders(src) || src.device() != self.device()) return false;
    at::Tensor bits = self.view(at::kLong);
    if (!copy_as_eager_kernel(bits, src.expand_as(self).view(at::kLong))) return false;
    result = self;
  } else if (name == "aten::clone" && overload.empty()) {
    const auto format = args[1].toOptional<c10::MemoryFormat>();
    at::Tensor out = at::empty_like(self, self.options(), format);
    at::Tensor bits = out.view(at::kLong);
    if (!copy_as_eager_kernel(bits, self.view(at::kLong))) return false;
    result = out;
  } else if ((name == "aten::zero_" && overload.empty()) || (name == "aten::fill_" && overload == "Scalar")) {
    const c10::Scalar value = name == "aten::zero_" ? c10::Scalar(0.0) : args[1].toScalar();
    if (value.isComplex()) return false;
    const double v = value.toDouble();
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    // As two int32 fills of the low and high words (exact: an int64 value
    // past 2^53 would not pass through a kernel's double scalar), along a
    // dim of stride 1; without one, into a dense copy whose bits are copied.
    at::Tensor t = self.dim() == 0 ? self.view({1}) : self;
    for (int64_t d = 0; d < t.dim() && t.stride(-1) != 1; ++d)
      if (t.stride(d) == 1) t = t.movedim(d, -1);
    const bool dense = t.stride(-1) == 1;
    at::Tensor target = dense ? t : at::empty(t.sizes(), t.options());
    const at::Tensor words = target.view(at::kInt);  // little-endian: the low word first
    words.slice(-1, 0, std::nullopt, 2).fill_(static_cast<int64_t>(static_cast<int32_t>(bits & 0xffffffffu)));
    words.slice(-1, 1, std::nullopt, 2).fill_(static_cast<int64_t>(static_cast<int32_t>(bits >> 32)));
    at::Tensor t_bits = t.view(at::kLong);
    if (!dense && !copy_as_eager_kernel(t_bits, target.view(at::kLong))) return false;
    result = self;
  } else {
    return false;
  }
  torch::jit::drop(*stack, n);
  stack->emplace_back(std::move(result));
  return true;
}

}  // namespace openneuron::integration
