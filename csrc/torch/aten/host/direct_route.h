// The router without boxing, for the ops a training step calls thousands of
// times (pointwise math, matmuls, norms, losses).
//
// The boxed router (router.cc) handles every op, but for a tiny op its
// generic work (pushing arguments onto a stack, walking the schema to check
// devices, looking up per-op facts) costs as much as the CPU kernel itself.
// A direct kernel does the same for the common case in typed C++: every
// tensor on one neuron device (CPU 0-dim scalars allowed where the op allows
// them), host-addressable memory, op not forced onto the CPU fallback. Any
// other call (a device mismatch to report, a CPU tensor, the copying
// fallback) goes to the boxed router, so errors and behaviour stay the same.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>

#include <ATen/core/Tensor.h>
#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "torch/aten/host/cpu_views.h"
#include "torch/aten/cuda_dtypes.h"
#include "torch/aten/eager/eager_fusion.h"
#include "torch/aten/router.h"
#include "torch/aten/host/cpu_allocation_redirect.h"
#include "torch/runtime/device.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {

// What a direct kernel needs to know about its op (one per op, shared by
// threads), refreshed when settings change: OPENNEURON_FORCE_CPU_FALLBACK
// can name any op.
struct DirectOpFacts {
  std::once_flag found;
  std::optional<c10::OperatorHandle> op;
  std::atomic<int> generation{-1};
  std::atomic<bool> direct{false};  // host memory, not forced onto the fallback
  // Not direct only because eager fusion may hold it: calls too small to be
  // held (kMinHeldElementsOnCpp) are direct.
  std::atomic<bool> direct_when_small{false};
  std::atomic<bool> accepts_cpu_scalars{false};  // CPU 0-dim tensors allowed
  std::atomic<bool> has_mutable_args{false};
};
// `facts` refreshed for the current settings.
DirectOpFacts& direct_op_facts(const char* name, const char* overload,
                               DirectOpFacts& facts);

namespace direct {

template <class T>
constexpr bool is_tensor_v =
    std::is_same_v<std::decay_t<T>, at::Tensor> ||
    std::is_same_v<std::decay_t<T>, std::optional<at::Tensor>>;

// Argument types the direct kernel understands; ops with others (tensor
// lists, generators, devices) stay on the boxed router.
template <class T>
constexpr bool supported_arg_v =
    is_tensor_v<T> || std::is_arithmetic_v<std::decay_t<T>> ||
    std::is_same_v<std::decay_t<T>, c10::Scalar> ||
    std::is_same_v<std::decay_t<T>, std::optional<c10::Scalar>> ||
    std::is_same_v<std::decay_t<T>, c10::IntArrayRef> ||
    std::is_same_v<std::decay_t<T>, c10::SymIntArrayRef> ||
    std::is_same_v<std::decay_t<T>, c10::SymInt> ||
    std::is_same_v<std::decay_t<T>, std::optional<c10::SymInt>> ||
    std::is_same_v<std::decay_t<T>, at::OptionalIntArrayRef> ||
    std::is_same_v<std::decay_t<T>, std::optional<int64_t>> ||
    std::is_same_v<std::decay_t<T>, std::optional<double>> ||
    std::is_same_v<std::decay_t<T>, std::optional<bool>> ||
    std::is_same_v<std::decay_t<T>, std::optional<c10::ScalarType>> ||
    std::is_same_v<std::decay_t<T>, std::optional<c10::MemoryFormat>> ||
    std::is_same_v<std::decay_t<T>, std::string_view> ||
    std::is_same_v<std::decay_t<T>, std::optional<std::string_view>>;

// Finds the op's device, or says the call needs the boxed router.
class DeviceScan {
 public:
  explicit DeviceScan(bool accepts_cpu_scalars)
      : accepts_cpu_scalars_(accepts_cpu_scalars) {}
  void add(const at::Tensor& t) {
    if (!t.defined()) return;
    largest_ = std::max(largest_, t.numel());
    const auto device = t.device();
    if (device.type() == kNeuron) {
      if (index_ < 0) index_ = device.index();
      else if (index_ != device.index()) direct_ = false;
    } else if (!(accepts_cpu_scalars_ && device.is_cpu() && t.dim() == 0)) {
      direct_ = false;
    }
  }
  void add(const std::optional<at::Tensor>& t) {
    if (t) add(*t);
  }
  template <class T>
  void add(const T&) {}
  // A direct call needs at least one neuron tensor to name its device.
  bool direct() const { return direct_ && index_ >= 0; }
  c10::DeviceIndex device() const { return index_; }
  int64_t largest() const { return largest_; }  // elements of the largest tensor

 private:
  bool accepts_cpu_scalars_;
  bool direct_ = true;
  c10::DeviceIndex index_ = -1;
  int64_t largest_ = 0;
};

// Holds the CPU views handed to the kernel: references into it stay valid
// for the whole call.
template <size_t N>
class ViewSlots {
 public:
  explicit ViewSlots(CpuViews& views) : views_(views) {}
  at::Tensor& view(const at::Tensor& t) {
    auto& slot = slots_[used_++];
    slot = t.defined() && t.device().type() == kNeuron ? views_.to_cpu(t) : t;
    return slot;
  }

 private:
  CpuViews& views_;
  std::array<at::Tensor, N> slots_;
  size_t used_ = 0;
};

// An argument as the CPU kernel takes it.
template <class T, class Slots>
decltype(auto) to_cpu_arg(Slots& slots, T&& arg) {
  using Plain = std::decay_t<T>;
  if constexpr (std::is_same_v<Plain, at::Tensor>) {
    if constexpr (std::is_const_v<std::remove_reference_t<T>>)
      return static_cast<const at::Tensor&>(slots.view(arg));
    else
      return static_cast<at::Tensor&>(slots.view(arg));
  } else if constexpr (std::is_same_v<Plain, std::optional<at::Tensor>>) {
    if (!arg) return std::optional<at::Tensor>();
    return std::optional<at::Tensor>(slots.view(*arg));
  } else {
    return std::forward<T>(arg);
  }
}

// The caller's tensor a `Tensor&` result refers to (in-place and out= ops
// return one of their mutable arguments).
template <class... Args>
at::Tensor& caller_tensor(Args&... args) {
  at::Tensor* found = nullptr;
  auto match = [&](auto& arg) {
    using Plain = std::decay_t<decltype(arg)>;
    if constexpr (std::is_same_v<Plain, at::Tensor> &&
                  !std::is_const_v<std::remove_reference_t<decltype(arg)>>) {
      if (!found) found = &arg;  // the only mutable tensor, or the first
    }
  };
  (match(args), ...);
  TORCH_INTERNAL_ASSERT(found, "direct route: no mutable argument to return");
  return *found;
}

// A fresh result (a tensor or a tuple of tensors) as neuron tensors.
inline at::Tensor to_neuron_result(CpuViews& views, at::Tensor&& cpu) {
  return views.to_neuron(cpu);
}
template <class... Parts>
std::tuple<Parts...> to_neuron_result(CpuViews& views,
                                      std::tuple<Parts...>&& cpu) {
  static_assert((std::is_same_v<Parts, at::Tensor> && ...),
                "direct route: tuple results must hold tensors by value");
  return std::apply(
      [&](auto&&... parts) {
        return std::tuple<Parts...>(views.to_neuron(parts)...);
      },
      std::move(cpu));
}

template <class Op, class Schema>
struct Kernel;

template <class Op, class Result, class... Args>
struct Kernel<Op, Result(Args...)> {
  static_assert((supported_arg_v<Args> && ...),
                "direct route: an argument type it cannot route");
  static constexpr size_t kTensors =
      (size_t{0} + ... + (is_tensor_v<Args> ? 1 : 0));

  static DirectOpFacts& facts() {
    static DirectOpFacts cache;
    return direct_op_facts(Op::name, Op::overload_name, cache);
  }

  static Result call(c10::DispatchKeySet keys, Args... args) {
    auto& facts = Kernel::facts();
    DeviceScan scan(facts.accepts_cpu_scalars.load(std::memory_order_relaxed));
    (scan.add(args), ...);
    if (!scan.direct() || !(facts.direct.load(std::memory_order_relaxed) ||
                            (facts.direct_when_small.load(std::memory_order_relaxed) &&
                             scan.largest() < kMinHeldElementsOnCpp)))
      return boxed(facts, keys, std::forward<Args>(args)...);
    const bool mutates =
        facts.has_mutable_args.load(std::memory_order_relaxed);
    const auto device = scan.device();
    CpuViews views(device);
    ViewSlots<kTensors> slots(views);
    auto& queue = wait_current_stream(device);
    auto cpu = [&]() -> Result {
      RedirectCpuAllocations redirect(device, &queue);
      try {
        return Op::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU),
                              to_cpu_arg(slots, args)...);  // copies: a retry (CpuDtypeGap) reuses args
      } catch (const c10::Error& e) {
        if (is_cpu_dtype_gap(*facts.op, e)) throw CpuDtypeGap{};
        rethrow_with_op_context(*facts.op, device);
      }
    };
    try {
      if constexpr (std::is_lvalue_reference_v<Result>) {
        static_assert(std::is_same_v<Result, at::Tensor&>,
                      "direct route: unsupported reference result");
        cpu();
        if (mutates) views.write_back();
        return caller_tensor(args...);
      } else {
        Result result = cpu();
        if (mutates) views.write_back();
        return to_neuron_result(views, std::move(result));
      }
    } catch (const CpuDtypeGap&) {
      // The CPU kernel lacks the dtype: the router runs it as CUDA would.
      return boxed(facts, keys, args...);
    }
  }

  static Result boxed(DirectOpFacts& facts, c10::DispatchKeySet keys,
                      Args... args) {
    static const auto kernel =
        c10::BoxedKernel::makeFromFunction<&route_boxed>();
    return c10::impl::BoxedKernelWrapper<Result(Args...)>::call(
        kernel, *facts.op, keys, std::forward<Args>(args)...);
  }
};

}  // namespace direct

// Registers the direct kernel of at::_ops::<Op> for neuron, when the op has
// a CPU kernel to run.
template <class Op>
void register_direct(torch::Library& library) {
  using Sig = typename Op::schema;
  const auto op = c10::Dispatcher::singleton().findOp({Op::name, Op::overload_name});
  if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::CPU)) return;
  std::string name = Op::name;
  name = name.substr(6);  // "aten::"
  if (*Op::overload_name) name += std::string(".") + Op::overload_name;
  library.impl(name.c_str(), TORCH_FN((direct::Kernel<Op, Sig>::call)));
}

}  // namespace openneuron::integration
