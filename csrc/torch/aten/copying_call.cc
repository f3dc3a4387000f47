#include "torch/aten/copying_call.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "torch/aten/router.h"
#include "torch/aten/sparse_tensors.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

bool is_neuron(const at::Tensor& t) {
  return t.defined() && t.device().type() == kNeuron;
}

// No two elements share memory (gaps between them are fine).
bool non_overlapping(const at::Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;  // elements covered by the dims so far
  for (const auto& [stride, size] : dims) {
    if (stride < span) return false;
    span = stride * (size - 1) + span;
  }
  return true;
}

// A CPU copy with the same strides, so a CPU kernel (TensorIterator picks
// its output layout from its inputs') sees what it would see on CPU:
// broadcast dims stay broadcast, strided views stay strided (only the span
// they cover is allocated, not their whole storage).
at::Tensor copy_with_layout(const at::Tensor& t) {
  at::Tensor src = t;
  bool broadcast = false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) {
      src = src.narrow(d, 0, 1);
      broadcast = true;
    }
  }
  const auto options = src.options().device(c10::kCPU);
  at::Tensor cpu;
  if (src.is_non_overlapping_and_dense()) {
    cpu = src.to(options, /*non_blocking=*/false, /*copy=*/true,
                 at::MemoryFormat::Preserve);
  } else if (non_overlapping(src)) {
    cpu = at::empty_strided(src.sizes(), src.strides(), options).copy_(src);
  } else {
    cpu = src.to(options, /*non_blocking=*/false, /*copy=*/true);
  }
  return broadcast ? cpu.expand(t.sizes()) : cpu;
}

// The conjugate and negative bits travel as bits: resolving them on the
// device would run conj_physical/neg there, i.e. through this path again.
at::Tensor to_cpu(const at::Tensor& t);

// Sparse tensors travel as their components, read from the tensor itself:
// their accessor ops (_indices, _values) would come back through this path.
template <class Move>
at::Tensor move_sparse(const at::Tensor& t, c10::Device device, Move&& move) {
  c10::SmallVector<at::Tensor, 3> parts;
  for (const at::Tensor& part : sparse_parts(t)) parts.push_back(move(part));
  return make_sparse(t, device, parts);
}

at::Tensor to_cpu(const at::Tensor& t) {
  if (t.layout() != c10::kStrided) return move_sparse(t, c10::Device(c10::kCPU), to_cpu);
  const bool conj = t.is_conj(), neg = t.is_neg();
  at::Tensor raw = conj ? t.conj() : t;  // views: metadata only
  if (neg) raw = raw._neg_view();
  at::Tensor cpu = copy_with_layout(raw);
  if (neg) cpu = cpu._neg_view();
  return conj ? cpu.conj() : cpu;
}

// A new neuron tensor holding `cpu` with the layout the CPU kernel gave it
// (a column-major solution, a view into a larger buffer): its whole storage
// is copied when it is more than the tensor's own elements.
at::Tensor to_device(const at::Tensor& cpu, c10::Device device) {
  if (!cpu.defined() || cpu.device().type() != c10::kCPU) return cpu;
  if (cpu.layout() != c10::kStrided)
    return move_sparse(cpu, device, [&](const at::Tensor& part) { return to_device(part, device); });
  auto options = cpu.options().device(device);
  const int64_t storage_numel =
      static_cast<int64_t>(cpu.storage().nbytes()) / cpu.element_size();
  if (cpu.is_non_overlapping_and_dense() && cpu.storage_offset() == 0 &&
      storage_numel == cpu.numel()) {
    at::Tensor out = at::empty_strided(cpu.sizes(), cpu.strides(), options);
    out.copy_(cpu);
    return out;
  }
  at::Tensor flat = at::empty({0}, cpu.options())
                        .set_(cpu.storage(), 0, {storage_numel}, {1});
  return at::empty({storage_numel}, options)
      .copy_(flat)
      .as_strided(cpu.sizes(), cpu.strides(), cpu.storage_offset());
}

// The CPU copy of one argument, and the neuron tensors it stands for.
struct Converted {
  c10::IValue cpu;
  std::vector<at::Tensor> originals;  // per list element, or one
  std::vector<at::Tensor> copies;
};

Converted convert(const c10::IValue& v, std::optional<c10::Device>& device) {
  Converted c;
  auto one = [&](const at::Tensor& t) {
    if (!is_neuron(t)) return t;
    if (!device) device = t.device();
    at::Tensor copy = to_cpu(t);
    c.originals.push_back(t);
    c.copies.push_back(copy);
    return copy;
  };
  if (v.isTensor()) {
    c.cpu = one(v.toTensor());
  } else if (v.isTensorList()) {
    std::vector<at::Tensor> list;
    for (const at::Tensor& t : v.toTensorVector()) list.push_back(one(t));
    c.cpu = list;
  } else if (v.isList() && v.toList().elementType()->isSubtypeOf(
                               *c10::OptionalType::ofTensor())) {
    c10::List<std::optional<at::Tensor>> list;
    for (const c10::IValue& e : v.toList()) {
      if (e.isTensor()) list.push_back(one(e.toTensor()));
      else list.push_back(std::nullopt);
    }
    c.cpu = list;
  } else if (v.isDevice() && v.toDevice().type() == kNeuron) {
    if (!device) device = v.toDevice();
    c.cpu = c10::Device(c10::kCPU);
  } else {
    c.cpu = v;
  }
  return c;
}

bool writes(const c10::Argument& a) {
  return a.alias_info() && a.alias_info()->isWrite();
}

// Arguments an op writes although its schema does not say so:
// native_batch_norm updates running_mean/var in training (PyTorch's
// functionalization special-cases it too).
bool writes_unannotated(const c10::FunctionSchema& schema, size_t i) {
  return schema.name() == "aten::native_batch_norm" && (i == 3 || i == 4);
}

// The argument whose alias set a written return shares (`Tensor(a!) out`
// returned as `Tensor(a!)`).
std::optional<size_t> argument_aliased_by(const c10::FunctionSchema& schema,
                                          const c10::Argument& ret) {
  if (!writes(ret)) return std::nullopt;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto* a = schema.arguments()[i].alias_info();
    if (a && a->isWrite() && a->beforeSets() == ret.alias_info()->beforeSets())
      return i;
  }
  return std::nullopt;
}

}  // namespace

void call_with_cpu_copies(const c10::OperatorHandle& op,
                          torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t first = stack->size() - num_args;
  std::optional<c10::Device> device;
  std::vector<Converted> args;
  args.reserve(num_args);
  for (size_t i = 0; i < num_args; ++i) {
    args.push_back(convert((*stack)[first + i], device));
    (*stack)[first + i] = args.back().cpu;
  }
  op.redispatchBoxed(
      c10::DispatchKeySet(cpu_key_for(c10::ArrayRef<c10::IValue>(*stack).slice(
          stack->size() - op.schema().arguments().size()))),
      stack);

  // Every argument the op writes gets the new values, resized as out=
  // arguments may be.
  for (size_t i = 0; i < num_args; ++i) {
    if (!writes(schema.arguments()[i]) && !writes_unannotated(schema, i))
      continue;
    for (size_t k = 0; k < args[i].originals.size(); ++k) {
      at::Tensor& original = args[i].originals[k];
      const at::Tensor& copy = args[i].copies[k];
      // (a sparse tensor's copy_ takes the source's sizes itself)
      if (original.layout() == c10::kStrided && original.sizes() != copy.sizes())
        original.resize_(copy.sizes());
      original.copy_(copy);
    }
  }
  const c10::Device target =
      device.value_or(c10::Device(kNeuron, current_device()));
  const size_t num_returns = schema.returns().size();
  for (size_t j = 0; j < num_returns; ++j) {
    c10::IValue& r = (*stack)[stack->size() - num_returns + j];
    if (auto arg = argument_aliased_by(schema, schema.returns()[j])) {
      const auto& originals = args[*arg].originals;
      if (r.isTensor() && originals.size() == 1) {
        r = originals[0];
        continue;
      }
      if (r.isTensorList() && !originals.empty()) {
        r = c10::IValue(originals);
        continue;
      }
    }
    if (r.isTensor()) {
      r = to_device(r.toTensor(), target);
    } else if (r.isTensorList()) {
      std::vector<at::Tensor> list;
      for (const at::Tensor& t : r.toTensorVector())
        list.push_back(to_device(t, target));
      r = list;
    }
  }
}

}  // namespace openneuron::integration
