// Routes every ATen op on neuron tensors that has no kernel of its own.
//
// On a driver with host-addressable memory (the host driver) the op runs
// ATen's CPU kernel directly on device memory through CPU views: no copy.
// Otherwise, or when the op is forced onto it, the op takes the CPU-fallback
// path with copies (cpu_fallback.h).
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "hal/driver.h"
#include "torch/aten/cpu_fallback.h"
#include "torch/aten/host/cpu_views.h"
#include "torch/aten/cuda_dtypes.h"
#include "torch/aten/device_check.h"
#include "torch/aten/eager/addbmm_op.h"
#include "torch/aten/eager/eager_fusion.h"
#include "torch/aten/eager/eager_kernel.h"
#include "torch/aten/eager/convolution_kernels.h"
#include "torch/aten/eager/copy_ops.h"
#include "torch/aten/eager/decomposition_fallback.h"
#include "torch/aten/eager/float64_bits.h"
#include "torch/aten/eager/foreach.h"
#include "torch/aten/eager/counting_ops.h"
#include "torch/aten/eager/scatter_reduce_ops.h"
#include "torch/aten/eager/avg_pool_ops.h"
#include "torch/aten/eager/cumulative_ops.h"
#include "torch/aten/eager/histogram_ops.h"
#include "torch/aten/eager/order_statistics_ops.h"
#include "torch/aten/eager/sixteen_bit_ops.h"
#include "torch/aten/eager/batch_norm_ops.h"
#include "torch/aten/eager/embedding_bag.h"
#include "torch/aten/eager/indexing_ops.h"
#include "torch/aten/eager/random_ops.h"
#include "torch/aten/op_info.h"
#include "torch/runtime/sync_debug.h"
#include "torch/aten/router.h"
#include "torch/aten/host/cpu_allocation_redirect.h"
#include "torch/runtime/device.h"
#include "torch/runtime/generator.h"
#include "torch/runtime/settings.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {

c10::DispatchKey cpu_key_for(c10::ArrayRef<c10::IValue> args) {
  auto key = c10::DispatchKey::CPU;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.is_quantized()) key = c10::DispatchKey::QuantizedCPU;
    else if (t.is_sparse()) key = c10::DispatchKey::SparseCPU;
    else if (at::sparse_csr::is_sparse_compressed(t.layout()) && key == c10::DispatchKey::CPU)
      key = c10::DispatchKey::SparseCsrCPU;  // CSR, CSC, BSR, BSC
  };
  for (const auto& v : args) {
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isList()) {
      for (const auto& e : v.toListRef())
        if (e.isTensor()) visit(e.toTensor());
    }
  }
  return key;
}

bool host_addressable() {
  static const bool value =
      hal::driver().device_count() > 0 &&
      hal::driver().properties(0).host_addressable;
  return value;
}

void rethrow_with_op_context(const c10::OperatorHandle& op,
                             c10::DeviceIndex device) {
  const auto& name = op_info(op).name;
  try {
    throw;
  } catch (c10::NotImplementedError& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, name,
        " is not implemented for the neuron device",
        std::string_view(e.msg()).find(" not implemented for '") != std::string_view::npos
            ? " for this dtype: the host driver runs ATen's "
                              "CPU kernels, which lack it (neither CUDA nor a "
                              "wider dtype covers it).\n"
                            : ": the host driver runs ATen's CPU kernels and "
                              "this op has none.\n",
        e.what_without_backtrace());
  } catch (c10::Error& e) {
    e.add_context("while running " + name + " on neuron:" +
                  std::to_string(device));
    throw;
  }
}

namespace {

// The neuron generators an op was called with (argument index, generator),
// for running it again (cuda_dtypes.h) after use_engine_generators.
using CallerGenerators = c10::SmallVector<std::pair<size_t, c10::IValue>, 1>;

// Host kernels are CPU kernels and draw from the generator's CPU engine.
CallerGenerators use_engine_generators(const OpInfo& info, const c10::FunctionSchema& schema,
                                       torch::jit::Stack& stack, c10::DeviceIndex device) {
  CallerGenerators callers;
  const size_t first = stack.size() - schema.arguments().size();
  for (size_t i : info.generator_args) {
    auto& v = stack[first + i];
    callers.emplace_back(i, v);
    if (v.isNone()) {
      v = default_generator(device).get<NeuronGenerator>()->engine();
      continue;
    }
    const auto gen = v.toGenerator();
    TORCH_CHECK(gen.device().type() == kNeuron,
                "Expected a 'neuron' device type for generator but found '",
                gen.device().type(), "' (argument '",
                schema.arguments()[i].name(), "' of ", info.name, ")");
    v = gen.get<NeuronGenerator>()->engine();
  }
  return callers;
}

c10::IValue to_cpu(CpuViews& views, const c10::IValue& v) {
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    return t.defined() && t.device().type() == kNeuron ? views.to_cpu(t) : v;
  }
  if (v.isList()) {
    auto list = v.toList();
    c10::impl::GenericList out(list.elementType());
    out.reserve(list.size());
    for (const auto& e : list) out.push_back(to_cpu(views, e));
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == kNeuron)
    return c10::Device(c10::kCPU);
  if (v.isStorage() && v.toStorage().device().type() == kNeuron)
    return views.to_cpu(v.toStorage());
  return v;
}

c10::IValue to_neuron(CpuViews& views, const c10::IValue& v) {
  if (v.isTensor()) return views.to_neuron(v.toTensor());
  if (v.isList()) {
    auto list = v.toList();
    c10::impl::GenericList out(list.elementType());
    out.reserve(list.size());
    for (const auto& e : list) out.push_back(to_neuron(views, e));
    return out;
  }
  return v;
}

void run_host_kernel(const c10::OperatorHandle& op, const OpInfo& info,
                     c10::DeviceIndex device, torch::jit::Stack* stack,
                     CallerGenerators& generators) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t first = stack->size() - num_args;
  // The arguments stay alive (and in place: the views point at them) while
  // the stack holds their CPU views.
  c10::SmallVector<c10::IValue, 8> originals;
  originals.reserve(num_args);
  for (size_t i = first; i < stack->size(); ++i)
    originals.push_back(std::move((*stack)[i]));
  CpuViews views(device);
  for (size_t i = 0; i < num_args; ++i)
    (*stack)[first + i] = to_cpu(views, originals[i]);
  // A CPU kernel reads device memory once queued work is done; a view op
  // only makes metadata, so it need not wait (and must not: every
  // transpose would drain the queue, and flush held chains).
  auto& queue = !info.is_view ? wait_current_stream(device) : current_queue(device);
  std::exception_ptr dtype_gap;
  {
    RedirectCpuAllocations redirect(device, &queue);
    try {
      op.redispatchBoxed(c10::DispatchKeySet(cpu_key_for(originals)), stack);
    } catch (const c10::Error& e) {
      if (!is_cpu_dtype_gap(op, e)) rethrow_with_op_context(op, device);
      dtype_gap = std::current_exception();
    }
  }
  if (dtype_gap) {
    // The CPU kernel lacks a dtype: run the op on the neuron tensors again,
    // as CUDA would (cuda_dtypes.h).
    stack->resize(std::min(stack->size(), first));
    for (auto& [i, generator] : generators) originals[i] = std::move(generator);
    for (auto& v : originals) stack->push_back(std::move(v));
    if (run_with_cuda_dtypes(op, stack)) return;
    try {
      std::rethrow_exception(dtype_gap);
    } catch (const c10::Error&) {
      rethrow_with_op_context(op, device);
    }
  }
  if (info.has_mutable_args) views.write_back();
  const size_t num_returns = schema.returns().size();
  for (size_t i = stack->size() - num_returns; i < stack->size(); ++i)
    (*stack)[i] = to_neuron(views, (*stack)[i]);
}

// Sparse or quantized tensor arguments.
bool has_layout_tensors(const torch::jit::Stack& stack, const c10::FunctionSchema& schema) {
  const size_t n = schema.arguments().size();
  return cpu_key_for(c10::ArrayRef<c10::IValue>(stack).slice(stack.size() - n)) !=
         c10::DispatchKey::CPU;
}

// set_sync_debug_mode: `info`'s op waits for device values here.
void note_op_sync(const OpInfo& info, const torch::jit::Stack& stack, size_t num_args) {
  if (sync_debug_mode() == 0) return;
  if (info.host_sync == OpInfo::HostSync::WithMaskIndex) {
    bool mask = false;
    for (size_t i = stack.size() - num_args; i < stack.size(); ++i) {
      if (!stack[i].isList()) continue;
      for (const c10::IValue& e : stack[i].toListRef())
        if (e.isTensor() && (e.toTensor().scalar_type() == at::kBool || e.toTensor().scalar_type() == at::kByte))
          mask = true;
    }
    if (!mask) return;
  }
  note_host_sync(info.name.c_str(), info.host_sync == OpInfo::HostSync::WithMaskIndex
                                        ? "a boolean index: its size is the count of true values"
                                        : "its result depends on device values");
}

}  // namespace

void route_boxed(const c10::OperatorHandle& op, c10::DispatchKeySet,
                 torch::jit::Stack* stack) {
  const auto& info = op_info(op);
  if (C10_UNLIKELY(info.host_sync != OpInfo::HostSync::Never))
    note_op_sync(info, *stack, op.schema().arguments().size());
  const auto device = check_devices(info, op.schema(), *stack);
  // A pointwise call may be held back and fused with its neighbours
  // (eager_fusion.h); anything else sees their results first. A view only
  // makes metadata and leaves a chain alone.
  if (!info.force_cpu_fallback && hold_for_fusion(op, info, device, stack)) return;
  if (!info.is_view) flush_held_calls(device);
  // Random ops draw on the device from the neuron generator itself.
  if (info.draws_random && !host_addressable() && !info.force_cpu_fallback && settings().eager_kernels &&
      !has_layout_tensors(*stack, op.schema()) && run_random_op(op, device, stack))
    return;
  auto generators = use_engine_generators(info, op.schema(), *stack, device);
  // Without host-addressable memory only dense view ops run on CPU views
  // (metadata only); a sparse or quantized tensor's view would read it.
  if (info.force_cpu_fallback ||
      (!host_addressable() && (!info.is_view || has_layout_tensors(*stack, op.schema())))) {
    // A kernel the compiler makes for the device, when it can.
    if (!info.force_cpu_fallback && !host_addressable() && !has_layout_tensors(*stack, op.schema()) &&
        settings().eager_kernels &&
        (run_eager_kernel(op, info, device, stack) || run_float64_as_bits(op, stack) ||
         run_foreach_per_tensor(op, stack) ||
         run_cat_as_copies(op, device, stack) || run_library_op(op, device, stack) || run_counting_op(op, stack) ||
         run_embedding_bag_op(op, stack) || run_scatter_reduce_op(op, stack) || run_batch_norm_op(op, stack) ||
         run_avg_pool_op(op, stack) || run_order_statistic_op(op, stack) || run_cumulative_op(op, stack) ||
         run_histogram_op(op, stack) || run_addbmm_op(op, stack) ||
         run_copy_op(op, device, stack) || run_convolution_op(op, stack) ||
         run_sixteen_bit_in_float32(op, stack) || run_decomposition(op, stack)))
      return;
    run_on_cpu_with_copies(op, info, stack);
    return;
  }
  run_host_kernel(op, info, device, stack, generators);
}

namespace {

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&route_boxed>());
}

// Quantized and sparse neuron tensors: the same route, to PyTorch's
// QuantizedCPU, SparseCPU and SparseCsrCPU kernels.
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&route_boxed>());
}
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&route_boxed>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&route_boxed>());
}

}  // namespace

void run_on_host(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  CallerGenerators none;
  run_host_kernel(op, op_info(op), device, stack, none);
}

// True when the op takes a device argument (a factory or a conversion such
// as _to_copy): on CPU views it would make CPU tensors where it must not.
bool takes_device(const c10::FunctionSchema& schema) {
  for (const auto& arg : schema.arguments())
    if (arg.type()->str().find("Device") != std::string::npos) return true;
  return false;
}

void route_ops_with_cpu_kernels_directly() {
  // Ops with a CPU kernel and a generic composite one would take the
  // composite on neuron: a structured op's functional form allocates and
  // then dispatches its out= form (two dispatcher trips for every add), and
  // ops such as native_layer_norm would run a different algorithm than on
  // CPU (different numerics, slower). Composite-only ops are not all
  // device-generic either (conj_physical_ calls a per-device stub, mode
  // checks the device type). Route them all through the router, which runs
  // the CPU kernel, or on CPU the same composite, on CPU views.
  static auto* library = new torch::Library(
      torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
      __LINE__);
  // The same for quantized and sparse neuron tensors and PyTorch's
  // QuantizedCPU / SparseCPU / SparseCsrCPU kernels (clone, for one, has a
  // composite kernel that would make a dense copy).
  static const std::pair<c10::DispatchKey, c10::DispatchKey> kLayoutKeys[] = {
      {c10::DispatchKey::QuantizedCPU, c10::DispatchKey::QuantizedPrivateUse1},
      {c10::DispatchKey::SparseCPU, c10::DispatchKey::SparsePrivateUse1},
      {c10::DispatchKey::SparseCsrCPU, c10::DispatchKey::SparseCsrPrivateUse1}};
  static auto* layout_libraries = new std::vector<std::unique_ptr<torch::Library>>();
  for (const auto& [cpu_key, neuron_key] : kLayoutKeys)
    layout_libraries->push_back(std::make_unique<torch::Library>(
        torch::Library::IMPL, "aten", neuron_key, __FILE__, __LINE__));
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op) continue;
    std::string op_name = name.name.substr(6);
    if (!name.overload_name.empty()) op_name += "." + name.overload_name;
    for (size_t i = 0; i < std::size(kLayoutKeys); ++i) {
      const auto [cpu_key, neuron_key] = kLayoutKeys[i];
      if (op->hasKernelForDispatchKey(cpu_key) && !op->hasKernelForDispatchKey(neuron_key) &&
          !takes_device(op->schema()) && !op->hasTag(at::Tag::inplace_view)) {
        (*layout_libraries)[i]->impl(op_name.c_str(),
                                     torch::CppFunction::makeFromBoxedFunction<&route_boxed>());
      }
    }
    if (op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    const bool cpu = op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
    const bool composite =
        op->hasKernelForDispatchKey(
            c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
        op->hasKernelForDispatchKey(
            c10::DispatchKey::CompositeExplicitAutograd);
    if (!composite || (!cpu && takes_device(op->schema()))) continue;
    // In-place view ops (squeeze_, transpose_, as_strided_, ...) change
    // metadata only; their composite kernel is device-generic, as on CUDA,
    // and runs on tensors without data (functionalization replays them on
    // its wrappers), which CPU views would need.
    if (op->hasTag(at::Tag::inplace_view)) continue;
    library->impl(op_name.c_str(),
                  torch::CppFunction::makeFromBoxedFunction<&route_boxed>());
  }
}

}  // namespace openneuron::integration
