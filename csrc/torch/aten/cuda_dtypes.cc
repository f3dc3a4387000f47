// Ops on dtypes CUDA supports and ATen's CPU kernels do not (cuda_dtypes.h).
//
// Widening: the op runs again, through the neuron dispatch key, on copies of
// its narrow inputs in a wider dtype; results are rounded back and written
// arguments (in-place, out=) receive the rounded values. CUDA computes Half,
// BFloat16 and ComplexHalf in float internally, so the values are CUDA's up
// to float32 summation order. Emulations follow CUDA's kernel where widening
// would not give its result (histc bins integers with integer arithmetic).
#include "torch/aten/cuda_dtypes.h"

#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace openneuron::integration {
namespace {

using at::ScalarType;

std::optional<ScalarType> wider(ScalarType t) {
  switch (t) {
    case ScalarType::Half:
    case ScalarType::BFloat16:
      return ScalarType::Float;
    case ScalarType::ComplexHalf:
      return ScalarType::ComplexFloat;
    case ScalarType::Bool:
      return ScalarType::Byte;
    default:
      return std::nullopt;
  }
}

// The dtype a result computed in the wider dtype is rounded to.
ScalarType narrowed(ScalarType result, ScalarType narrow) {
  if (narrow == ScalarType::ComplexHalf && result == ScalarType::Float)
    return ScalarType::Half;  // abs, angle of complex32
  return result == *wider(narrow) ? narrow : result;
}

bool on_neuron(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

template <class Fn>
void for_each_tensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toList())
      if (e.isTensor()) fn(e.toTensor());
  }
}

// The narrow dtype whose family the op is widened in, from the neuron
// tensor arguments: ComplexHalf (with Half, its real part's dtype), Half or
// BFloat16; Bool only when there is none of those (a Bool mask beside Half
// data stays a mask). None for a mix (Half with BFloat16).
std::optional<ScalarType> narrow_dtype(c10::ArrayRef<c10::IValue> args) {
  bool seen[3] = {false, false, false};  // ComplexHalf, Half, BFloat16
  bool has_bool = false;
  for (const auto& v : args) {
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (!on_neuron(t)) return;
      switch (t.scalar_type()) {
        case ScalarType::ComplexHalf: seen[0] = true; break;
        case ScalarType::Half: seen[1] = true; break;
        case ScalarType::BFloat16: seen[2] = true; break;
        case ScalarType::Bool: has_bool = true; break;
        default: break;
      }
    });
  }
  if (seen[2]) return seen[0] || seen[1] ? std::nullopt : std::optional(ScalarType::BFloat16);
  if (seen[0]) return ScalarType::ComplexHalf;
  if (seen[1]) return ScalarType::Half;
  if (has_bool) return ScalarType::Bool;
  return std::nullopt;
}

// Whether tensors of dtype `t` are widened when the family is `narrow`.
bool in_family(ScalarType t, ScalarType narrow) {
  return t == narrow || (narrow == ScalarType::ComplexHalf && t == ScalarType::Half);
}

bool is_dtype_argument(const c10::Argument& arg) {
  return arg.real_type()->str().find("ScalarType") != std::string::npos;
}

bool is_written(const c10::Argument& arg) {
  return arg.alias_info() != nullptr && arg.alias_info()->isWrite();
}

// Bool is widened only for the ops CUDA has Bool kernels for and the CPU
// has not: elsewhere Byte arithmetic would give results CUDA refuses to.
bool cuda_has_bool_kernel(std::string_view name) {
  return name == "aten::abs" || name == "aten::abs_" || name == "aten::trace";
}

bool run_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t first = stack->size() - num_args;
  const auto narrow =
      narrow_dtype(c10::ArrayRef<c10::IValue>(*stack).slice(first, num_args));
  if (!narrow) return false;
  if (*narrow == ScalarType::Bool && !cuda_has_bool_kernel(schema.name())) return false;
  const ScalarType wide = *wider(*narrow);
  auto widen = [&](const at::Tensor& t) {
    return on_neuron(t) && in_family(t.scalar_type(), *narrow) ? t.to(*wider(t.scalar_type())) : t;
  };

  std::vector<c10::IValue> args(stack->begin() + first, stack->end());
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // original, widened
  bool explicit_wide_dtype = false;  // the caller asked for the wide dtype itself
  for (size_t i = 0; i < num_args; ++i) {
    const auto& arg = schema.arguments()[i];
    c10::IValue& v = args[i];
    if (v.isTensor()) {
      at::Tensor original = v.toTensor();
      at::Tensor w = widen(original);
      if (is_written(arg) && !w.is_same(original)) written.emplace_back(original, w);
      v = w;
    } else if (v.isList() && v.toList().elementType()->kind() != c10::TypeKind::IntType) {
      if (is_written(arg)) {
        bool has_narrow = false;
        for_each_tensor(v, [&](const at::Tensor& t) { has_narrow |= !widen(t).is_same(t); });
        if (has_narrow) return false;  // a written list (foreach out=): not handled
        continue;
      }
      auto list = v.toList();
      c10::impl::GenericList out(list.elementType());
      out.reserve(list.size());
      for (const c10::IValue& e : list) out.push_back(e.isTensor() ? c10::IValue(widen(e.toTensor())) : e);
      v = out;
    } else if (v.isInt() && is_dtype_argument(arg)) {
      const auto dtype = static_cast<ScalarType>(v.toInt());
      if (in_family(dtype, *narrow)) v = static_cast<int64_t>(*wider(dtype));
      explicit_wide_dtype |= dtype == wide;
    }
  }
  stack->erase(stack->begin() + first, stack->end());
  for (auto& v : args) stack->push_back(std::move(v));
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);

  for (auto& [original, w] : written) {
    if (original.sizes() != w.sizes()) original.resize_(w.sizes());  // an out= the op resized
    original.copy_(w);
  }
  auto result_of = [&](const at::Tensor& t) -> at::Tensor {
    for (const auto& [original, w] : written)
      if (t.is_same(w)) return original;
    if (!on_neuron(t) || explicit_wide_dtype) return t;
    const ScalarType target = narrowed(t.scalar_type(), *narrow);
    return target == t.scalar_type() ? t : t.to(target);
  };
  const size_t num_returns = schema.returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
    c10::IValue& r = (*stack)[i];
    if (r.isTensor()) {
      r = result_of(r.toTensor());
    } else if (r.isTensorList()) {
      std::vector<at::Tensor> out;
      for (const auto& t : r.toTensorVector()) out.push_back(result_of(t));
      r = out;
    }
  }
  return true;
}

// CUDA's nansum of complex numbers: an element with a NaN part counts as 0.
at::Tensor nansum_of_complex(const at::Tensor& self, at::OptionalIntArrayRef dim,
                             bool keepdim, std::optional<ScalarType> dtype) {
  return at::sum(self.masked_fill(self.isnan(), 0), dim, keepdim, dtype);
}

// The result into an out= argument, resized as ATen's out= ops do.
at::Tensor into(const at::Tensor& out, const at::Tensor& result) {
  TORCH_CHECK(out.scalar_type() == result.scalar_type(), "Expected out tensor to have dtype ",
              result.scalar_type(), ", but got ", out.scalar_type(), " instead");
  out.resize_(result.sizes());
  out.copy_(result);
  return out;
}

bool emulate(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const std::string_view name = schema.name();
  const bool out = schema.overload_name() == "out";
  const size_t num_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  if (name != "aten::histc" && name != "aten::nansum") return false;
  const at::Tensor self = args[0].toTensor();
  at::Tensor result;
  if (name == "aten::histc") {
    if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) return false;
    result = histc_of_integers(self, args[1].toInt(), args[2].toScalar(), args[3].toScalar());
  } else {
    if (!self.is_complex()) return false;
    std::optional<std::vector<int64_t>> dim;
    if (!args[1].isNone()) dim = args[1].toIntVector();
    result = nansum_of_complex(self, dim ? at::OptionalIntArrayRef(*dim) : at::OptionalIntArrayRef(),
                               args[2].toBool(), args[3].toOptional<ScalarType>());
  }
  if (out) result = into(args[num_args - 1].toTensor(), result);
  torch::jit::drop(*stack, num_args);
  torch::jit::push(*stack, std::move(result));
  return true;
}

}  // namespace

// CUDA's histc of an integer tensor: bounds truncated to integers, the data's
// own range when they are equal, and bins found with integer arithmetic
// (floor((x - min) * bins / (max - min)), the top edge in the last bin).
at::Tensor histc_of_integers(const at::Tensor& self, int64_t bins,
                             const at::Scalar& min, const at::Scalar& max) {
  TORCH_CHECK(bins > 0, "torch.histc: bins must be > 0, but got ", bins, " for bins");
  int64_t lo = min.to<int64_t>(), hi = max.to<int64_t>();
  TORCH_CHECK(lo <= hi, "torch.histc: max must be larger than min");
  if (lo == hi && self.numel() > 0) {
    lo = self.min().item<int64_t>();
    hi = self.max().item<int64_t>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  const at::Tensor x = self.reshape({-1}).to(at::kLong);
  const at::Tensor in_range = x.ge(lo).logical_and(x.le(hi));
  const at::Tensor bin =
      x.sub(lo).mul(bins).div(hi - lo, "floor").clamp_max(bins - 1);
  return at::bincount(bin.masked_select(in_range), {}, bins).to(self.scalar_type());
}

bool is_cpu_dtype_gap(const c10::OperatorHandle& op, const c10::Error& error) {
  // MKL's FFT kernels fail on ComplexHalf and Half with assertions of their own.
  if (op.schema().name().rfind("aten::_fft_", 0) == 0) return true;
  const std::string_view message = error.msg();
  for (const char* pattern : {" not implemented for '", "Unsupported dtype ",
                              "doesn't support tensors of type",
                              "on CPU does not support complex"}) {
    if (message.find(pattern) != std::string_view::npos) return true;
  }
  return false;
}

bool run_with_cuda_dtypes(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  return emulate(op, stack) || run_widened(op, stack);
}

bool run_in_wider_dtype(const c10::OperatorHandle& op, torch::jit::Stack* stack) { return run_widened(op, stack); }

}  // namespace openneuron::integration
