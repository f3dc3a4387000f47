#include "torch/aten/eager/batch_norm_ops.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

using Args = c10::ArrayRef<c10::IValue>;
using at::Tensor;

Tensor optional_tensor(const c10::IValue& v) { return v.isTensor() ? v.toTensor() : Tensor(); }

bool sixteen_bit(const Tensor& t) { return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16; }

// The dtype the CPU kernel computes in: float for 16-bit inputs.
at::ScalarType compute_type(const Tensor& input) { return at::toOpMathType(input.scalar_type()); }

// The parameters' dtype (saved statistics and parameter gradients are in
// it): the first defined one's, else the input's.
at::ScalarType parameter_type(const Tensor& input, std::initializer_list<Tensor> per_channel) {
  for (const Tensor& t : per_channel)
    if (t.defined()) return t.scalar_type();
  return input.scalar_type();
}

// Whether the composition takes these tensors, as the CPU kernel does: a
// floating input on a neuron device with at least one element, and
// per-channel tensors on its device, one value per channel, all of one
// dtype: the input's, or float32 beside a 16-bit input.
bool composable(const Tensor& input, std::initializer_list<Tensor> per_channel) {
  if (!input.defined() || input.device().type() != kNeuron || input.dim() < 2 || input.numel() == 0) return false;
  if (input.scalar_type() != at::kFloat && input.scalar_type() != at::kDouble && !sixteen_bit(input)) return false;
  const at::ScalarType params = parameter_type(input, per_channel);
  if (params != input.scalar_type() && !(sixteen_bit(input) && params == at::kFloat)) return false;
  for (const Tensor& t : per_channel)
    if (t.defined() && (t.device() != input.device() || t.scalar_type() != params || t.numel() != input.size(1)))
      return false;
  return true;
}

Tensor in_type(const Tensor& t, at::ScalarType type) { return t.defined() ? t.to(type) : t; }

// Every dim but the channels'.
std::vector<int64_t> statistic_dims(const Tensor& input) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector broadcast against the input ([1, C, 1, ...]).
Tensor per_channel(const Tensor& v, const Tensor& input) {
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = input.size(1);
  return v.reshape(shape);
}

struct Forward {
  Tensor output, save_mean, save_invstd;
};

// The CPU kernel's forward (batch_norm_cpu), computed in compute_type: in
// training, statistics of the batch (running statistics updated in place
// where `update`), else the running ones, whose saved statistics are empty.
Forward forward(const Tensor& input_, const Tensor& weight_, const Tensor& bias_, const Tensor& running_mean,
                const Tensor& running_var, bool training, double momentum, double eps, bool update) {
  const at::ScalarType ct = compute_type(input_);
  const at::ScalarType params = parameter_type(input_, {weight_, bias_, running_mean, running_var});
  const Tensor input = input_.to(ct), weight = in_type(weight_, ct), bias = in_type(bias_, ct);
  Tensor mean, invstd;
  Forward f;
  if (training) {
    auto [var, batch_mean] = at::var_mean(input, statistic_dims(input), /*correction=*/0, /*keepdim=*/false);
    mean = batch_mean;
    invstd = (var + eps).rsqrt();
    if (update && running_mean.defined())
      running_mean.copy_(running_mean.to(ct) * (1 - momentum) + mean * momentum);
    if (update && running_var.defined()) {
      const double n = static_cast<double>(input.numel() / input.size(1));
      running_var.copy_(running_var.to(ct) * (1 - momentum) + var * (momentum * n / (n - 1)));
    }
    f.save_mean = mean.to(params);
    f.save_invstd = invstd.to(params);
  } else {
    mean = running_mean.to(ct);
    invstd = (running_var.to(ct) + eps).rsqrt();
    f.save_mean = at::empty({0}, input.options().dtype(params));
    f.save_invstd = at::empty({0}, input.options().dtype(params));
  }
  const Tensor alpha = weight.defined() ? invstd * weight : invstd;
  const Tensor beta = bias.defined() ? bias - mean * alpha : -(mean * alpha);
  f.output = (input * per_channel(alpha, input) + per_channel(beta, input)).to(input_.scalar_type());
  return f;
}

// The CPU kernel's backward (batch_norm_backward_cpu): the gradients the
// mask asks for (the others undefined).
std::vector<Tensor> backward(const Tensor& grad_, const Tensor& input_, const Tensor& weight_,
                             const Tensor& running_mean, const Tensor& running_var, const Tensor& save_mean,
                             const Tensor& save_invstd, bool training, double eps, std::array<bool, 3> mask) {
  const at::ScalarType ct = compute_type(input_);
  const at::ScalarType params = parameter_type(input_, {weight_, running_mean, running_var, save_mean});
  const Tensor grad = grad_.to(ct), input = input_.to(ct), weight = in_type(weight_, ct);
  const Tensor mean = training ? save_mean.to(ct) : running_mean.to(ct);
  const Tensor invstd = training ? save_invstd.to(ct) : (running_var.to(ct) + eps).rsqrt();
  const std::vector<int64_t> dims = statistic_dims(input);
  const Tensor centred = input - per_channel(mean, input);
  const Tensor grad_sum = grad.sum(dims);
  const Tensor dot = (grad * centred).sum(dims);
  const Tensor scale = weight.defined() ? invstd * weight : invstd;
  Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) {
    if (training) {
      const double n = static_cast<double>(input.numel() / input.size(1));
      const Tensor projection = dot * invstd * invstd / n;
      grad_input = (grad - per_channel(grad_sum / n, input) - centred * per_channel(projection, input)) *
                   per_channel(scale, input);
    } else {
      grad_input = grad * per_channel(scale, input);
    }
    grad_input = grad_input.to(input_.scalar_type());
  }
  if (mask[1]) grad_weight = (dot * invstd).to(params);
  if (mask[2]) grad_bias = grad_sum.to(params);
  return {grad_input, grad_weight, grad_bias};
}

std::array<bool, 3> output_mask(const c10::IValue& v) {
  const auto list = v.toBoolList();
  return {list.get(0), list.get(1), list.get(2)};
}

// native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)
// and _native_batch_norm_legit (running statistics updated in place).
bool native_batch_norm(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args a = op_args(op, stack);
  const Tensor input = a[0].toTensor(), weight = optional_tensor(a[1]), bias = optional_tensor(a[2]);
  const Tensor running_mean = optional_tensor(a[3]), running_var = optional_tensor(a[4]);
  const bool training = a[5].toBool();
  if (!composable(input, {weight, bias, running_mean, running_var})) return false;
  if (!training && (!running_mean.defined() || !running_var.defined())) return false;  // the CPU's error
  Forward f = forward(input, weight, bias, running_mean, running_var, training, a[6].toDouble(), a[7].toDouble(),
                      /*update=*/true);
  finish_op(stack, a.size(), {f.output, f.save_mean, f.save_invstd});
  return true;
}

// _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps)
bool batch_norm_no_stats(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args a = op_args(op, stack);
  const Tensor input = a[0].toTensor(), weight = optional_tensor(a[1]), bias = optional_tensor(a[2]);
  if (!a[3].toBool() || !composable(input, {weight, bias})) return false;  // evaluation needs statistics
  Forward f = forward(input, weight, bias, {}, {}, true, a[4].toDouble(), a[5].toDouble(), false);
  finish_op(stack, a.size(), {f.output, f.save_mean, f.save_invstd});
  return true;
}

// _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps)
bool batch_norm_no_training(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args a = op_args(op, stack);
  const Tensor input = a[0].toTensor(), weight = optional_tensor(a[1]), bias = optional_tensor(a[2]);
  const Tensor running_mean = a[3].toTensor(), running_var = a[4].toTensor();
  if (!composable(input, {weight, bias, running_mean, running_var})) return false;
  Forward f = forward(input, weight, bias, running_mean, running_var, false, a[5].toDouble(), a[6].toDouble(), false);
  finish_op(stack, a.size(), {f.output, f.save_mean, f.save_invstd});
  return true;
}

// _batch_norm_with_update (training, running statistics updated) and
// _batch_norm_no_update (evaluation): (input, weight, bias, running_mean,
// running_var, momentum, eps) -> (output, save_mean, save_invstd, reserve).
bool batch_norm_update_form(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool update) {
  Args a = op_args(op, stack);
  const Tensor input = a[0].toTensor(), weight = optional_tensor(a[1]), bias = optional_tensor(a[2]);
  const Tensor running_mean = optional_tensor(a[3]), running_var = optional_tensor(a[4]);
  if (!composable(input, {weight, bias, running_mean, running_var})) return false;
  if (!running_mean.defined() || !running_var.defined()) return false;
  Forward f = forward(input, weight, bias, running_mean, running_var, update, a[5].toDouble(), a[6].toDouble(), update);
  finish_op(stack, a.size(), {f.output, f.save_mean, f.save_invstd, at::empty({0}, input.options().dtype(at::kByte))});
  return true;
}
bool batch_norm_with_update(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  return batch_norm_update_form(op, stack, true);
}
bool batch_norm_no_update(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  return batch_norm_update_form(op, stack, false);
}

// native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
// save_invstd, train, eps, output_mask) and batch_norm_backward (the same, then reserve).
bool batch_norm_backward_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args a = op_args(op, stack);
  const Tensor grad = a[0].toTensor(), input = a[1].toTensor(), weight = optional_tensor(a[2]);
  const Tensor running_mean = optional_tensor(a[3]), running_var = optional_tensor(a[4]);
  const Tensor save_mean = optional_tensor(a[5]), save_invstd = optional_tensor(a[6]);
  const bool training = a[7].toBool();
  const bool fits = training ? composable(input, {weight, running_mean, running_var, save_mean, save_invstd})
                              : composable(input, {weight, running_mean, running_var});
  if (!fits || grad.device() != input.device() ||
      grad.scalar_type() != input.scalar_type() || grad.sizes() != input.sizes())
    return false;
  if (training ? !save_mean.defined() || !save_invstd.defined() : !running_mean.defined() || !running_var.defined())
    return false;
  finish_op(stack, a.size(),
            backward(grad, input, weight, running_mean, running_var, save_mean, save_invstd, training,
                     a[8].toDouble(), output_mask(a[9])));
  return true;
}

using Handler = bool (*)(const c10::OperatorHandle&, torch::jit::Stack*);

const std::unordered_map<std::string, Handler>& handlers() {
  static const std::unordered_map<std::string, Handler> table = {
      {"aten::native_batch_norm", native_batch_norm},
      {"aten::_native_batch_norm_legit", native_batch_norm},
      {"aten::_native_batch_norm_legit.no_stats", batch_norm_no_stats},
      {"aten::_native_batch_norm_legit_no_training", batch_norm_no_training},
      {"aten::_batch_norm_with_update", batch_norm_with_update},
      {"aten::_batch_norm_no_update", batch_norm_no_update},
      {"aten::native_batch_norm_backward", batch_norm_backward_op},
      {"aten::batch_norm_backward", batch_norm_backward_op},
  };
  return table;
}

}  // namespace

bool run_batch_norm_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto it = handlers().find(op_full_name(op));
  if (it == handlers().end()) return false;
  const ComposedOpScope composed;
  return it->second(op, stack);
}

}  // namespace openneuron::integration
