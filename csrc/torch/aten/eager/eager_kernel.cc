#include "torch/aten/eager/eager_kernel.h"

#include <ATen/EmptyTensor.h>
#include <c10/util/Exception.h>

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "compiler/compile.h"
#include "compiler/ir/errors.h"
#include "compiler/ir/json.h"
#include "hal/driver.h"
#include "torch/aten/eager/eager_graph.h"
#include "torch/aten/eager/eager_op.h"
#include "torch/aten/eager/library_kernels.h"
#include "torch/aten/router.h"
#include "torch/runtime/compiled_kernels.h"
#include "torch/runtime/device.h"
#include "torch/runtime/settings.h"

namespace openneuron::integration {
namespace {

// A compiled eager kernel, or the reason there is none.
struct EagerKernel {
  bool ok = false;
  bool built = false;  // not found in the persistent kernel cache
  std::string library, entry, label;
  std::vector<int> bindings;     // the graph input bound to each kernel buffer
  std::vector<int64_t> handles;  // per device, once loaded (-1: not yet)
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<EagerKernel>> kernels;  // by graph text
  std::map<std::string, EagerKernelRecord> records;                       // by op
};

Cache& cache() {
  static auto* c = new Cache();  // leaked: kernels may run during exit
  return *c;
}

std::string compile_options(const std::string& target) {
  const Settings& s = settings();
  compiler::Json o = compiler::Json::object();
  o.set("cache_dir", compiler::Json::string(s.compile_cache_dir));
  o.set("cache_enabled", compiler::Json::boolean(s.compile_cache_enabled));
  o.set("cache_max_bytes", compiler::Json::integer(s.compile_cache_max_bytes));
  o.set("target", compiler::Json::string(target));
  return o.dump();
}

// Compiles the graph; a graph that is not a single kernel over its inputs
// (externs, several steps) gets none.
std::shared_ptr<EagerKernel> compile(const EagerOp& op, const std::string& graph, c10::DeviceIndex device) {
  auto k = std::make_shared<EagerKernel>();
  const std::string target = hal::driver().properties(device).kernel_target;
  compiler::Json plan;
  try {
    plan = compiler::Json::parse(compiler::compile_graph(graph, compile_options(target)));
  } catch (const compiler::UnsupportedError&) {
    return k;  // the compiler has no lowering for this call: the fallback runs it
  } catch (const std::exception& e) {
    TORCH_WARN("neuron: the eager kernel of ", op.name, " failed to build (", e.what(),
               "); the op runs through the CPU fallback instead.");
    return k;
  }
  const compiler::Json& steps = plan.at("steps");
  if (steps.size() != 1 || steps[0].at("kind").as_string() != "kernel" || plan.at("externs").size() != 0)
    return k;
  std::map<int64_t, int> input_of_id;
  const compiler::Json& inputs = plan.at("inputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].is_int()) input_of_id[inputs[i].as_int()] = static_cast<int>(i);
  for (const auto& a : steps[0].at("allocs").items()) {
    if (!a.get("input").is_int()) return k;  // a buffer of its own
    input_of_id[a.at("id").as_int()] = static_cast<int>(a.at("input").as_int());  // stored in place
  }
  for (const auto& id : steps[0].at("buffers").items()) {
    auto it = input_of_id.find(id.as_int());
    if (it == input_of_id.end()) return k;
    k->bindings.push_back(it->second);
  }
  k->library = plan.at("library").as_string();
  k->built = !plan.at("cache").at("hit").as_bool();
  k->entry = steps[0].at("name").as_string();
  k->label = "eager kernel: " + op.name;
  k->ok = true;
  return k;
}

// The op's kernel for this graph (compiled on first use).
std::shared_ptr<EagerKernel> kernel_for(const EagerOp& op, const std::string& graph, c10::DeviceIndex device) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto& slot = c.kernels[graph];
  if (!slot) {
    slot = compile(op, graph, device);
    if (slot->ok) {
      auto& record = c.records[op.name];
      record.op = op.name;
      ++record.kernels;
      record.builds += slot->built;
    }
  }
  if (slot->ok) {
    if (slot->handles.size() <= static_cast<size_t>(device)) slot->handles.resize(device + 1, -1);
    if (slot->handles[device] < 0)
      slot->handles[device] = compiled_kernel(slot->library, slot->entry, device, slot->label);
    ++c.records[op.name].launches;
  }
  return slot;
}

void record_library_launch(const EagerOp& op) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto& record = c.records[op.name];
  record.op = op.name;
  ++record.launches;
}

at::Tensor meta_like(const at::Tensor& t) {
  return at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type(), std::nullopt, std::nullopt,
                                        std::nullopt);
}

bool is_neuron(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == kNeuron;
}

// The call's output, allocated (functional), resized (out=) or given
// (in-place), as the op's meta function computed it. Throws the op's own
// error for a bad call.
std::optional<at::Tensor> output_of(const c10::OperatorHandle& op, const EagerOp& e,
                                    const c10::KernelFunction* meta_function, c10::DeviceIndex device,
                                    c10::ArrayRef<c10::IValue> args) {
  torch::jit::Stack meta;
  meta.reserve(args.size());
  for (const auto& v : args) meta.push_back(is_neuron(v) ? c10::IValue(meta_like(v.toTensor())) : v);
  try {
    if (meta_function)
      meta_function->callBoxed(op, c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
    else
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::Error&) {
    rethrow_with_op_context(op, device);
  }
  const at::Tensor& m = meta.back().toTensor();
  if (e.form == EagerOp::Form::Functional)
    return empty_compiled_buffer(m.sizes(), m.strides(), m.scalar_type(), device);
  at::Tensor out = args[e.out_arg].toTensor();
  if (e.form == EagerOp::Form::Out && out.sizes() != m.sizes()) {
    // The meta kernel resized its copy of `out` (and warned if it held data).
    out.resize_(m.sizes());
    if (out.strides() != m.strides()) out.as_strided_(m.sizes(), m.strides());
  }
  return out;
}

// Whether the kernel may write `out` while reading the call's tensors: an
// input sharing its memory must be the very same view (read and written at
// the same element, pointwise); other overlaps take the fallback's copies.
bool overlap_is_safe(const EagerOp& e, c10::ArrayRef<c10::IValue> args, const at::Tensor& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int>(i) == e.out_arg || !is_neuron(args[i])) continue;
    const at::Tensor& t = args[i].toTensor();
    if (!t.is_alias_of(out)) continue;
    if (e.family != EagerOp::Family::Pointwise || t.data_ptr() != out.data_ptr() ||
        t.sizes() != out.sizes() || t.strides() != out.strides())
      return false;
  }
  return true;
}

}  // namespace

bool run_eager_kernel(const c10::OperatorHandle& op, const OpInfo& info, c10::DeviceIndex device,
                      torch::jit::Stack* stack) {
  if (!settings().eager_kernels) return false;
  const EagerOp& e = eager_op(op);
  if (e.family == EagerOp::Family::None) return false;
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  c10::ArrayRef<c10::IValue> args(stack->data() + stack->size() - num_args, num_args);
  if (e.form != EagerOp::Form::Functional && !is_neuron(args[e.out_arg])) return false;
  if (e.form != EagerOp::Form::Functional && !overlap_is_safe(e, args, args[e.out_arg].toTensor())) return false;
  std::optional<at::Tensor> out = output_of(op, e, e.meta_function, device, args);
  if (!out) return false;
  if (e.family == EagerOp::Family::Matmul) {
    if (!run_matmul(e, args, *out, device)) return false;
    record_library_launch(e);
    at::Tensor result = *out;
    torch::jit::drop(*stack, num_args);
    stack->emplace_back(std::move(result));
    return true;
  }
  std::string why;
  std::optional<EagerGraph> graph = eager_graph(e, schema, args, *out, &why);
  if (!graph) return false;
  std::shared_ptr<EagerKernel> k = kernel_for(e, graph->json, device);
  if (!k->ok) return false;
  if (out->numel() > 0) {
    std::vector<at::Tensor> buffers;
    buffers.reserve(k->bindings.size());
    for (int i : k->bindings) buffers.push_back(graph->operands[i]);
    launch_compiled_kernel(k->handles[device], buffers, graph->symbols);
  }
  at::Tensor result = *out;
  torch::jit::drop(*stack, num_args);
  stack->emplace_back(std::move(result));
  return true;
}

std::vector<EagerKernelRecord> eager_kernel_report() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::vector<EagerKernelRecord> out;
  for (const auto& [name, r] : c.records) out.push_back(r);
  return out;
}

void reset_eager_kernel_report() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.records.clear();
}

}  // namespace openneuron::integration
