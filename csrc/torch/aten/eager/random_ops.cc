#include "torch/aten/eager/random_ops.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/compiled_kernels.h"
#include "torch/runtime/device.h"
#include "torch/runtime/generator.h"

namespace openneuron::integration {
namespace {

using Args = c10::ArrayRef<c10::IValue>;



// The library's entry suffix for a dtype the kernels write directly (bool as
// its byte).
const char* suffix(at::ScalarType t) { return library_type_suffix(t == at::kBool ? at::kByte : t); }

// The generator a call draws from: its argument, or the device's default.
NeuronGenerator* generator_of(const c10::IValue& arg, c10::DeviceIndex device) {
  if (arg.isNone()) return default_generator(device).get<NeuronGenerator>();
  const at::Generator gen = arg.toGenerator();
  TORCH_CHECK(gen.device().type() == kNeuron, "Expected a 'neuron' device type for generator but found '",
              gen.device().type(), "'");
  return gen.get<NeuronGenerator>();
}

// Fills `self` with kernel `kind` (scalars a and b after n, seed, offset;
// `p`: a probability per element). A dtype the kernel lacks (float16,
// bfloat16) or a layout it does not write (strided) is drawn into a
// contiguous float32 or `self`-typed buffer and copied in on the device.
bool fill(const at::Tensor& self, const std::string& kind, NeuronGenerator* gen, int64_t a, int64_t b,
          const at::Tensor* p = nullptr) {
  const c10::DeviceIndex device = self.device().index();
  const bool floating_only = kind == "random_uniform" || kind == "random_normal" || kind == "random_bernoulli_tensor";
  at::ScalarType dtype = self.scalar_type();
  if (dtype == at::kHalf || dtype == at::kBFloat16) dtype = at::kFloat;
  const char* s = suffix(dtype);
  if (!s || (floating_only && !at::isFloatingType(dtype))) return false;
  const int64_t kernel = library_kernel(device, kind + "_" + s);
  if (kernel < 0) return false;  // (a float64 normal on GLSL: no float64 log)
  if (self.numel() == 0) return true;
  const bool direct = dtype == self.scalar_type() && self.is_contiguous();
  at::Tensor out = direct ? self : at::empty(self.sizes(), self.options().dtype(dtype));
  std::vector<at::Tensor> buffers;
  if (p) buffers.push_back(p->to(dtype).expand(self.sizes()).contiguous());
  buffers.push_back(out);
  uint64_t seed, offset;
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    std::tie(seed, offset) = gen->next_philox_draw();
  }
  launch_compiled_kernel(kernel, buffers,
                         {self.numel(), static_cast<int64_t>(seed), static_cast<int64_t>(offset), a, b});
  if (!direct) self.copy_(out);
  return true;
}

// uniform_(self, from, to) and normal_(self, mean, std).
bool uniform_or_normal(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, bool normal) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  const double a = args[1].toDouble(), b = args[2].toDouble();
  if (normal ? !(b >= 0) : !(a <= b && std::isfinite(a) && std::isfinite(b))) return false;  // the CPU raises
  if (!fill(self, normal ? "random_normal" : "random_uniform", generator_of(args[3], device), double_bits(a), double_bits(b)))
    return false;
  finish_op(stack, args.size(), {self});
  return true;
}

// bernoulli_(self, p) with a float p.
bool bernoulli_scalar(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  const double p = args[1].toDouble();
  if (!(p >= 0 && p <= 1)) return false;
  if (!fill(self, "random_bernoulli", generator_of(args[2], device), double_bits(p), 0)) return false;
  finish_op(stack, args.size(), {self});
  return true;
}

// bernoulli_(self, p) with a tensor p, and bernoulli(p) (a new tensor of
// p's dtype). p's elements must lie in [0, 1] (read back, as the CPU checks).
bool bernoulli_tensor(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, bool inplace) {
  Args args = op_args(op, stack);
  const at::Tensor p = inplace ? args[1].toTensor() : args[0].toTensor();
  if (p.device() != c10::Device(kNeuron, device) || !at::isFloatingType(p.scalar_type())) return false;
  at::Tensor self = inplace ? args[0].toTensor() : at::empty_like(p, at::MemoryFormat::Contiguous);
  if (inplace && !at::isFloatingType(self.scalar_type())) return false;
  if (p.numel() > 0 && !p.ge(0).logical_and(p.le(1)).all().item().toBool()) return false;  // the CPU raises
  if (!fill(self, "random_bernoulli_tensor", generator_of(args[inplace ? 2 : 1], device), 0, 0, &p)) return false;
  finish_op(stack, args.size(), {self});
  return true;
}

// The integers a dtype the kernels write holds exactly (lowest, highest);
// none for the others (16-bit floats: the CPU's kernels).
std::optional<std::pair<int64_t, int64_t>> exact_integers(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return std::pair<int64_t, int64_t>(-(1LL << 24), 1LL << 24);
    case at::kDouble: return std::pair<int64_t, int64_t>(-(1LL << 53), 1LL << 53);
    case at::kLong: return std::pair<int64_t, int64_t>(INT64_MIN, INT64_MAX);
    case at::kInt: return std::pair<int64_t, int64_t>(INT32_MIN, INT32_MAX);
    case at::kShort: return std::pair<int64_t, int64_t>(INT16_MIN, INT16_MAX);
    case at::kChar: return std::pair<int64_t, int64_t>(INT8_MIN, INT8_MAX);
    case at::kByte: return std::pair<int64_t, int64_t>(0, UINT8_MAX);
    default: return std::nullopt;
  }
}

// random_(self, from, to) and random_(self, to): integers in [from, to),
// where `self`'s dtype holds them exactly.
bool random_range(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, bool has_from) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  const int64_t from = has_from ? args[1].toInt() : 0;
  const c10::IValue& to_arg = args[has_from ? 2 : 1];
  if (to_arg.isNone() || to_arg.toInt() <= from) return false;  // default ranges and errors: the CPU's
  const int64_t to = to_arg.toInt();
  // The values self's dtype holds exactly; past them the CPU raises.
  const auto range_of = exact_integers(self.scalar_type());
  if (!range_of || from < range_of->first || to - 1 > range_of->second) return false;
  // The range as unsigned: from = INT64_MIN spans more than int64 holds.
  const uint64_t range = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  if (!fill(self, "random_integers", generator_of(args[has_from ? 3 : 2], device), from, static_cast<int64_t>(range)))
    return false;
  finish_op(stack, args.size(), {self});
  return true;
}

// native_dropout(input, p, train) -> (input * mask / (1 - p), mask), as the
// CPU: the mask is bool, p = 1 gives zeros.
bool native_dropout(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor input = args[0].toTensor();
  const double p = args[1].toDouble();
  const bool train = args[2].isNone() || args[2].toBool();
  if (input.numel() == 0 || !at::isFloatingType(input.scalar_type())) return false;
  at::Tensor output, mask;
  if (train) {
    const double keep = 1 - p;
    mask = at::empty_like(input, input.options().dtype(at::kBool), at::MemoryFormat::Contiguous);
    if (!(keep >= 0 && keep <= 1) || !fill(mask, "random_bernoulli", generator_of(c10::IValue(), device), double_bits(keep), 0))
      return false;
    output = input.mul(mask).mul_(keep == 0 ? 0.0 : 1.0 / keep);
  } else {
    mask = at::empty_like(input, input.options().dtype(at::kBool));
    mask.fill_(true);
    output = input.clone();
  }
  finish_op(stack, args.size(), {output, mask});
  return true;
}

// normal(mean, std) with a tensor mean and/or std: mean + std * z, z drawn
// standard normal into the broadcast shape (the CPU's formula). std must be
// >= 0 (read back, as the CPU checks; else its error).
bool normal_tensors(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack,
                    bool mean_tensor, bool std_tensor) {
  Args args = op_args(op, stack);
  const at::Tensor mean = mean_tensor ? args[0].toTensor() : at::Tensor();
  const at::Tensor std = std_tensor ? args[1].toTensor() : at::Tensor();
  const at::Tensor& like = mean_tensor ? mean : std;
  if (!at::isFloatingType(like.scalar_type())) return false;
  if (mean_tensor && std_tensor && (mean.scalar_type() != std.scalar_type() || mean.device() != std.device()))
    return false;
  if (std_tensor ? (std.numel() > 0 && !std.ge(0).all().item().toBool()) : !(args[1].toDouble() >= 0)) return false;
  at::Tensor out = at::empty(mean_tensor && std_tensor ? at::infer_size(mean.sizes(), std.sizes()) : like.sizes().vec(),
                             like.options());
  if (!fill(out, "random_normal", generator_of(args[2], device), double_bits(0.0), double_bits(1.0))) return false;
  if (std_tensor) out.mul_(std);
  else out.mul_(args[1].toDouble());
  if (mean_tensor) out.add_(mean);
  else out.add_(args[0].toDouble());
  finish_op(stack, args.size(), {out});
  return true;
}

// randperm(n, [generator,] out): a random permutation of 0..n-1 in out's
// dtype. n must fit the dtype exactly, as the CPU checks (else its error).
bool randperm(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, bool has_generator) {
  Args args = op_args(op, stack);
  const int64_t n = args[0].toInt();
  at::Tensor out = args[has_generator ? 2 : 1].toTensor();
  const auto range_of = exact_integers(out.scalar_type());
  if (!range_of || n < 0 || (n > 0 && n - 1 > range_of->second)) return false;
  if (!loops_fit(device, n)) return false;  // the kernel loops over n in one invocation
  out.resize_({n});
  const bool direct = out.is_contiguous();
  at::Tensor target = direct ? out : at::empty({n}, out.options());
  if (!fill(target, "random_permutation", generator_of(has_generator ? args[1] : c10::IValue(), device), 0, 0))
    return false;
  if (!direct) out.copy_(target);
  finish_op(stack, args.size(), {out});
  return true;
}

// The dtype a transform of uniform draws is computed in: self's, or float32
// for 16-bit floats, float64 for integers (geometric_ into an integer tensor).
at::ScalarType work_dtype(at::ScalarType t) {
  if (t == at::kHalf || t == at::kBFloat16) return at::kFloat;
  return at::isFloatingType(t) ? t : at::kDouble;
}

// Draws in (0, 1] shaped like `self`, in `dtype`: 1 - u for u in [0, 1), so
// a log of it is finite (the CUDA kernels' curand range).
std::optional<at::Tensor> open_uniform(const at::Tensor& self, at::ScalarType dtype, NeuronGenerator* gen) {
  at::Tensor u = at::empty(self.sizes(), self.options().dtype(dtype));
  if (!fill(u, "random_uniform", gen, double_bits(0.0), double_bits(1.0))) return std::nullopt;
  return u.neg_().add_(1);
}

// Half the machine epsilon of a floating dtype.
double half_epsilon(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return 0.5 / 1024;
    case at::kBFloat16: return 0.5 / 128;
    case at::kDouble: return 0.5 * 2.220446049250313e-16;
    default: return 0.5 * 1.1920928955078125e-07;
  }
}

// Standard exponential draws shaped like `like`, in `dtype`: -log(1 - u), and
// never 0 (as CUDA's kernel: a draw within half an epsilon of 0, epsilon of
// `eps_of`, is that half epsilon).
std::optional<at::Tensor> standard_exponential(const at::Tensor& like, at::ScalarType dtype, at::ScalarType eps_of,
                                               NeuronGenerator* gen) {
  at::Tensor u = at::empty(like.sizes(), like.options().dtype(dtype));
  if (!fill(u, "random_uniform", gen, double_bits(0.0), double_bits(1.0))) return std::nullopt;
  const double half_eps = half_epsilon(eps_of);
  return at::where(u.ge(half_eps), u.neg().log1p_().neg_(), at::scalar_tensor(half_eps, u.options()));
}

// exponential_(self, lambd), geometric_(self, p), log_normal_(self, mean,
// std), cauchy_(self, median, sigma): CUDA's transformations of uniform or
// normal draws, written with device ops (fused into one kernel with eager
// fusion). Arguments the CPU rejects go to the CPU path, for its error.
bool exponential(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  const double lambd = args[1].toDouble();
  if (!(lambd > 0) || !at::isFloatingType(self.scalar_type())) return false;
  const auto e = standard_exponential(self, work_dtype(self.scalar_type()), self.scalar_type(),
                                      generator_of(args[2], device));
  if (!e) return false;
  self.copy_(e->mul_(1.0 / lambd));
  finish_op(stack, args.size(), {self});
  return true;
}

bool geometric(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  const double p = args[1].toDouble();
  if (!(p > 0 && p < 1) || self.scalar_type() == at::kBool || at::isComplexType(self.scalar_type())) return false;
  const auto v = open_uniform(self, work_dtype(self.scalar_type()), generator_of(args[2], device));
  if (!v) return false;
  // ceil(log(v) / log(1 - p)), at least 1 (the support starts at 1).
  self.copy_(v->log_().div_(std::log1p(-p)).ceil_().clamp_min_(1));
  finish_op(stack, args.size(), {self});
  return true;
}

bool log_normal(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  const double mean = args[1].toDouble(), std = args[2].toDouble();
  if (!(std > 0) || !at::isFloatingType(self.scalar_type())) return false;
  at::Tensor z = at::empty(self.sizes(), self.options().dtype(work_dtype(self.scalar_type())));
  if (!fill(z, "random_normal", generator_of(args[3], device), double_bits(mean), double_bits(std))) return false;
  self.copy_(z.exp_());
  finish_op(stack, args.size(), {self});
  return true;
}

bool cauchy(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  const double median = args[1].toDouble(), sigma = args[2].toDouble();
  if (!(sigma > 0) || !at::isFloatingType(self.scalar_type())) return false;
  const auto v = open_uniform(self, work_dtype(self.scalar_type()), generator_of(args[3], device));
  if (!v) return false;
  // median + sigma * tan(pi * (u - 1/2)), u in [0, 1) (= 1 - v)
  self.copy_(v->neg_().add_(0.5).mul_(M_PI).tan_().mul_(sigma).add_(median));
  finish_op(stack, args.size(), {self});
  return true;
}

// multinomial(self, n, replacement[, generator][, out]): the CPU's own
// algorithm, the exponential race: index of the largest p / q, q ~ Exp(1)
// (topk for n samples without replacement; with replacement, n independent
// races). Probabilities are checked as the CPU checks them (read back); any
// failing check, or a race too large for memory, takes the CPU path.
bool multinomial(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, bool has_out) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  const int64_t n = args[1].toInt();
  const bool replacement = args[2].toBool();
  if ((self.dim() != 1 && self.dim() != 2) || !at::isFloatingType(self.scalar_type()) || n <= 0) return false;
  const int64_t categories = self.size(-1);
  if (categories == 0 || categories > (int64_t(1) << 24) || (!replacement && n > categories)) return false;
  if (self.numel() == 0) return false;
  const bool valid = self.max().lt(INFINITY).logical_and(self.min().ge(0)).item().toBool() &&
                     !(self.dim() == 1 ? self.sum().eq(0) : self.sum(1).eq(0).any()).item().toBool();
  if (!valid) return false;
  const bool race_per_sample = replacement && n > 1;
  if (race_per_sample && self.numel() * n > (int64_t(1) << 26)) return false;
  at::Tensor p = self;
  if (race_per_sample) {  // (rows, n, categories): one race per sample
    std::vector<int64_t> shape = self.sizes().vec();
    shape.insert(shape.end() - 1, n);
    p = self.unsqueeze(-2).expand(shape);
  }
  const auto q = standard_exponential(p, self.scalar_type(), self.scalar_type(), generator_of(args[3], device));
  if (!q) return false;
  const at::Tensor keys = p.div(*q);
  at::Tensor result;
  if (race_per_sample || n == 1) result = keys.argmax(-1, /*keepdim=*/!race_per_sample);
  else result = std::get<1>(keys.topk(n));
  if (has_out) {
    at::Tensor out = args[4].toTensor();
    out.resize_(result.sizes());
    out.copy_(result);
    result = out;
  }
  finish_op(stack, args.size(), {result});
  return true;
}

using Handler = std::function<bool(const c10::OperatorHandle&, c10::DeviceIndex, torch::jit::Stack*)>;

const std::unordered_map<std::string, Handler>& handlers() {
  static const auto* table = new std::unordered_map<std::string, Handler>{
      {"aten::uniform_", [](auto& op, auto d, auto* s) { return uniform_or_normal(op, d, s, false); }},
      {"aten::normal_", [](auto& op, auto d, auto* s) { return uniform_or_normal(op, d, s, true); }},
      {"aten::bernoulli_.float", bernoulli_scalar},
      {"aten::bernoulli_.Tensor", [](auto& op, auto d, auto* s) { return bernoulli_tensor(op, d, s, true); }},
      {"aten::bernoulli", [](auto& op, auto d, auto* s) { return bernoulli_tensor(op, d, s, false); }},
      {"aten::random_.from", [](auto& op, auto d, auto* s) { return random_range(op, d, s, true); }},
      {"aten::random_.to", [](auto& op, auto d, auto* s) { return random_range(op, d, s, false); }},
      {"aten::native_dropout", native_dropout},
      {"aten::normal.Tensor_float", [](auto& op, auto d, auto* s) { return normal_tensors(op, d, s, true, false); }},
      {"aten::normal.float_Tensor", [](auto& op, auto d, auto* s) { return normal_tensors(op, d, s, false, true); }},
      {"aten::normal.Tensor_Tensor", [](auto& op, auto d, auto* s) { return normal_tensors(op, d, s, true, true); }},
      {"aten::randperm.generator_out", [](auto& op, auto d, auto* s) { return randperm(op, d, s, true); }},
      {"aten::randperm.out", [](auto& op, auto d, auto* s) { return randperm(op, d, s, false); }},
      {"aten::exponential_", exponential},
      {"aten::geometric_", geometric},
      {"aten::log_normal_", log_normal},
      {"aten::cauchy_", cauchy},
      {"aten::multinomial", [](auto& op, auto d, auto* s) { return multinomial(op, d, s, false); }},
      {"aten::multinomial.out", [](auto& op, auto d, auto* s) { return multinomial(op, d, s, true); }},
  };
  return *table;
}

}  // namespace

bool run_random_op(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  const auto& table = handlers();
  auto it = table.find(op_full_name(op));
  if (it == table.end()) return false;
  const ComposedOpScope composed;
  return it->second(op, device, stack);
}

}  // namespace openneuron::integration
