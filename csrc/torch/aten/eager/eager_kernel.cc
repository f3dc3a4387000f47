#include "torch/aten/eager/eager_kernel.h"

#include <ATen/EmptyTensor.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <limits>
#include <unordered_map>

#include "compiler/compile.h"
#include "compiler/ir/errors.h"
#include "compiler/ir/json.h"
#include "hal/driver.h"
#include "torch/aten/eager/eager_graph.h"
#include "torch/aten/eager/float64_bits.h"
#include "torch/aten/eager/eager_op.h"
#include "torch/aten/eager/library_kernels.h"
#include "torch/aten/op_info.h"
#include "torch/aten/router.h"
#include "torch/runtime/compiled_kernels.h"
#include "torch/runtime/device.h"
#include "torch/runtime/settings.h"

namespace openneuron::integration {

// A compiled eager graph: its kernels, launched in order (none: no kernel).
struct EagerKernel {
  struct Step {
    std::string entry, library;
    std::vector<int> bindings;     // the graph input bound to each kernel buffer
    std::vector<int64_t> handles;  // per device, once loaded (-1: not yet)
  };
  bool ok = false;
  std::string why_not;  // when not ok
  bool built = false;  // not found in the persistent kernel cache
  std::string label;
  std::vector<Step> steps;
};

namespace {

// A graph's kernel, compiled once: by the first thread that needs it, with
// the cache unlocked (a build takes ~1 s, and may run in the background
// while the calling thread launches other kernels).
struct KernelSlot {
  std::once_flag compiled;
  std::shared_ptr<EagerKernel> kernel;
  std::atomic<bool> done{false};  // `kernel` is set (read without the once_flag)
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<KernelSlot>> kernels;  // by graph text
  std::map<std::string, EagerKernelRecord> records;                       // by op
};

Cache& cache() {
  static auto* c = new Cache();  // leaked: kernels may run during exit
  return *c;
}

}  // namespace

std::string compile_options(const std::string& target) {
  const Settings& s = settings();
  compiler::Json o = compiler::Json::object();
  o.set("cache_dir", compiler::Json::string(s.compile_cache_dir));
  o.set("cache_enabled", compiler::Json::boolean(s.compile_cache_enabled));
  o.set("cache_max_bytes", compiler::Json::integer(s.compile_cache_max_bytes));
  // One kernel per op: a miss is the op's first use, nothing to explain, and
  // explaining reads every entry of the cache.
  o.set("cache_explain_misses", compiler::Json::boolean(false));
  o.set("target", compiler::Json::string(target));
  return o.dump();
}

namespace {

// Compiles the graph; a graph whose kernels need more than its inputs
// (externs, buffers of their own) gets none.
std::shared_ptr<EagerKernel> compile(const std::string& name, const std::string& graph, c10::DeviceIndex device) {
  auto k = std::make_shared<EagerKernel>();
  const std::string target = hal::driver().properties(device).kernel_target;
  compiler::Json plan;
  try {
    plan = compiler::Json::parse(compiler::compile_graph(graph, compile_options(target)));
  } catch (const compiler::UnsupportedError& e) {
    k->why_not = e.what();
    return k;  // the compiler has no lowering for this call: the fallback runs it
  } catch (const std::exception& e) {
    TORCH_WARN("neuron: the eager kernel of ", name, " failed to build (", e.what(),
               "); the op runs through the CPU fallback instead.");
    k->why_not = std::string("build failed: ") + e.what();
    return k;
  }
  const compiler::Json& steps = plan.at("steps");
  k->why_not = "the compiled graph needs more than one kernel over its tensors (buffers or library calls)";
  if (steps.size() == 0 || plan.at("externs").size() != 0) return k;
  std::map<int64_t, int> input_of_id;
  const compiler::Json& inputs = plan.at("inputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].is_int()) input_of_id[inputs[i].as_int()] = static_cast<int>(i);
  for (const auto& step : steps.items()) {
    if (step.at("kind").as_string() != "kernel") return k;
    for (const auto& a : step.at("allocs").items()) {
      if (!a.get("input").is_int()) return k;  // a buffer of its own
      input_of_id[a.at("id").as_int()] = static_cast<int>(a.at("input").as_int());  // stored in place
    }
  }
  for (const auto& step : steps.items()) {
    EagerKernel::Step st;
    st.entry = step.at("name").as_string();
    st.library = step.at("library").as_string();
    for (const auto& id : step.at("buffers").items()) {
      auto it = input_of_id.find(id.as_int());
      if (it == input_of_id.end()) return k;
      st.bindings.push_back(it->second);
    }
    k->steps.push_back(std::move(st));
  }
  k->built = !plan.at("cache").at("hit").as_bool();
  k->label = "eager kernel: " + name;
  k->ok = true;
  return k;
}

// This thread's last call declined a device kernel: its op and why (what
// the CPU fallback that follows tells the user).
thread_local std::pair<std::string, std::string> t_declined;

// The kernel of this graph (compiled on first use), recorded under `name`.
std::shared_ptr<EagerKernel> kernel_for(const std::string& name, const std::string& graph, c10::DeviceIndex device) {
  Cache& c = cache();
  std::shared_ptr<KernelSlot> entry;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto& e = c.kernels[graph];
    if (!e) e = std::make_shared<KernelSlot>();
    entry = e;
  }
  std::call_once(entry->compiled, [&] {
    auto k = compile(name, graph, device);
    std::lock_guard<std::mutex> lock(c.mutex);
    auto& record = c.records[name];
    record.op = name;
    if (k->ok) {
      ++record.kernels;
      record.builds += k->built;
    } else {
      record.declined = k->why_not;
    }
    entry->kernel = std::move(k);
    entry->done.store(true, std::memory_order_release);
  });
  const std::shared_ptr<EagerKernel>& slot = entry->kernel;
  if (!slot->ok) t_declined = {name, slot->why_not};
  std::lock_guard<std::mutex> lock(c.mutex);
  if (slot->ok) {
    for (auto& st : slot->steps) {
      if (st.handles.size() <= static_cast<size_t>(device)) st.handles.resize(device + 1, -1);
      if (st.handles[device] < 0) st.handles[device] = compiled_kernel(st.library, st.entry, device, slot->label);
    }
  }
  return slot;
}

void count_launch(const std::string& name) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.records[name].launches;
}

void record_declined(const EagerOp& op, const std::string& why) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto& record = c.records[op.name];
  record.op = op.name;
  record.declined = why;
  t_declined = {op.name, why};
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

// The call's outputs, allocated (functional; undefined where the meta
// function returns none), resized (out=) or given (in-place), as the op's
// meta function computed them. Throws the op's own error for a bad call.
// The results' metas of a call of an op without a C++ meta function, by
// its arguments' metas and values: the dispatcher's Meta kernel of many
// such ops is a Python function (relu: 0.2 ms a call), and it depends on
// nothing else. Failing calls are not kept: they raise every time.
struct MetaResult {
  bool defined;
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype;
};

void append(std::string& key, const void* p, size_t n) { key.append(static_cast<const char*>(p), n); }

bool meta_key(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, std::string* key) {
  const void* id = &schema;
  append(*key, &id, sizeof id);
  for (const auto& v : args) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      key->push_back('T');
      if (!t.defined()) continue;
      const int64_t facts[] = {static_cast<int64_t>(t.scalar_type()), t.dim(), t.device().type() == kNeuron,
                               t.unsafeGetTensorImpl()->is_wrapped_number()};
      append(*key, facts, sizeof facts);
      append(*key, t.sizes().data(), t.dim() * sizeof(int64_t));
      append(*key, t.strides().data(), t.dim() * sizeof(int64_t));
    } else if (v.isInt() || v.isBool() || v.isNone()) {
      const int64_t x = v.isInt() ? v.toInt() : v.isBool() ? v.toBool() : -7;
      key->push_back(v.isInt() ? 'i' : v.isBool() ? 'b' : 'n');
      append(*key, &x, sizeof x);
    } else if (v.isDouble()) {
      const double x = v.toDouble();
      key->push_back('d');
      append(*key, &x, sizeof x);
    } else if (v.isIntList()) {
      key->push_back('L');
      for (int64_t x : v.toIntVector()) append(*key, &x, sizeof x);
      key->push_back(';');
    } else if (v.isString()) {
      key->push_back('s');
      key->append(v.toStringRef());
      key->push_back(';');
    } else {
      return false;  // a list of tensors, a generator, ...: not kept
    }
  }
  return true;
}

}  // namespace

bool call_key(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, std::string* key) {
  if (!meta_key(schema, args, key)) return false;
  for (const auto& v : args) {
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const at::Tensor& t = v.toTensor();
    key->push_back(static_cast<char>('0' + t.is_conj() + 2 * t.is_neg()));
    if (!t.unsafeGetTensorImpl()->is_wrapped_number()) continue;
    const c10::Scalar s = at::native::_local_scalar_dense_cpu(t);
    if (s.isComplex()) return false;
    const double x = s.toDouble();
    append(*key, &x, sizeof x);
  }
  return true;
}

namespace {

struct MetaCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<MetaResult>> results;
};

MetaCache& meta_cache() {
  static auto* c = new MetaCache();
  return *c;
}

std::vector<at::Tensor> outputs_of(const c10::OperatorHandle& op, const EagerOp& e,
                                    const c10::KernelFunction* meta_function, c10::DeviceIndex device,
                                    c10::ArrayRef<c10::IValue> args) {
  std::string key;
  const bool cached = !meta_function && e.form != EagerOp::Form::Out && meta_key(op.schema(), args, &key);
  if (cached) {
    MetaCache& c = meta_cache();
    std::vector<MetaResult> found;
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      auto it = c.results.find(key);
      if (it != c.results.end()) found = it->second;
    }
    if (!found.empty()) {
      if (e.form != EagerOp::Form::Functional) return {args[e.out_arg].toTensor()};
      std::vector<at::Tensor> outs;
      for (const auto& m : found)
        outs.push_back(m.defined ? empty_compiled_buffer(m.sizes, m.strides, m.dtype, device) : at::Tensor());
      return outs;
    }
  }
  torch::jit::Stack meta;
  meta.reserve(args.size());
  for (const auto& v : args) {
    if (v.isTensorList()) {  // cat, stack: their meta kernels must not see device tensors
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorList())
        list.push_back(t.defined() && t.device().type() == kNeuron ? meta_like(t) : t);
      meta.emplace_back(std::move(list));
      continue;
    }
    meta.push_back(is_neuron(v) ? c10::IValue(meta_like(v.toTensor())) : v);
  }
  try {
    if (meta_function)
      meta_function->callBoxed(op, c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
    else
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::Error&) {
    rethrow_with_op_context(op, device);
  }
  if (cached) {
    std::vector<MetaResult> results;
    for (const auto& v : meta) {
      const at::Tensor m = v.isTensor() ? v.toTensor() : at::Tensor();
      results.push_back(m.defined() ? MetaResult{true, m.sizes().vec(), m.strides().vec(), m.scalar_type()}
                                    : MetaResult{false, {}, {}, at::kFloat});
    }
    MetaCache& c = meta_cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.results.size() > 8192) c.results.clear();  // bounded: shapes come and go
    c.results.emplace(std::move(key), std::move(results));
  }
  if (e.form == EagerOp::Form::Functional) {
    std::vector<at::Tensor> outs;
    for (const auto& v : meta) {
      const at::Tensor m = v.isTensor() ? v.toTensor() : at::Tensor();
      outs.push_back(m.defined() ? empty_compiled_buffer(m.sizes(), m.strides(), m.scalar_type(), device)
                                 : at::Tensor());
    }
    return outs;
  }
  const at::Tensor& m = meta.back().toTensor();
  at::Tensor out = args[e.out_arg].toTensor();
  if (e.form == EagerOp::Form::Out && out.sizes() != m.sizes()) {
    // The meta kernel resized its copy of `out` (and warned if it held data).
    out.resize_(m.sizes());
    if (out.strides() != m.strides()) out.as_strided_(m.sizes(), m.strides());
  }
  return {out};
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

// A call seen before (same call_key): its results' metas, its kernel and
// the graph operands' sources, so a call in a loop skips the meta function,
// the graph's text and the kernel lookup.
struct CallPlan {
  struct Result {
    bool defined;
    std::vector<int64_t> sizes, strides;
    at::ScalarType dtype;
  };
  std::vector<Result> results;  // functional results (none in place)
  std::vector<int> sources;         // per graph operand: argument index, or -1 - result index
  std::vector<int64_t> symbols;
  std::shared_ptr<EagerKernel> kernel;
  std::string name;
};

namespace {

struct PlanCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const CallPlan>> plans;
};

PlanCache& plan_cache() {
  static auto* c = new PlanCache();
  return *c;
}

const at::Tensor& source(const CallPlan& plan, size_t operand, c10::ArrayRef<c10::IValue> args,
                         const std::vector<at::Tensor>& outs) {
  const int s = plan.sources[operand];
  return s >= 0 ? args[s].toTensor() : outs[-1 - s];
}

// The plan of a call just compiled: where each graph operand comes from,
// by position (eager_graph.h: the defined results, then each neuron tensor
// argument in order but the one written), never by identity (a call of
// x * x must not make x * y read x twice).
std::shared_ptr<const CallPlan> make_plan(const EagerOp& e, c10::ArrayRef<c10::IValue> args,
                                          const std::vector<at::Tensor>& outs, const EagerGraph& graph,
                                          std::shared_ptr<EagerKernel> kernel) {
  auto plan = std::make_shared<CallPlan>();
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].defined()) plan->sources.push_back(-1 - static_cast<int>(k));
  for (size_t i = 0; i < args.size(); ++i)
    if (is_neuron(args[i]) && !(e.form != EagerOp::Form::Functional && static_cast<int>(i) == e.out_arg))
      plan->sources.push_back(static_cast<int>(i));
  if (plan->sources.size() != graph.operands.size()) return nullptr;
  for (size_t j = 0; j < plan->sources.size(); ++j)  // the same tensors, in the same places
    if (source(*plan, j, args, outs).unsafeGetTensorImpl() != graph.operands[j].unsafeGetTensorImpl())
      return nullptr;
  if (e.form == EagerOp::Form::Functional)
    for (const at::Tensor& t : outs)
      plan->results.push_back(t.defined() ? CallPlan::Result{true, t.sizes().vec(), t.strides().vec(), t.scalar_type()}
                                          : CallPlan::Result{false, {}, {}, at::kFloat});
  plan->symbols = graph.symbols;
  plan->kernel = std::move(kernel);
  plan->name = e.name;
  return plan;
}

}  // namespace

std::shared_ptr<const CallPlan> plan_call(const c10::OperatorHandle& op, const EagerOp& e, c10::DeviceIndex device,
                                          c10::ArrayRef<c10::IValue> args, std::vector<at::Tensor>* outs,
                                          bool with_kernel) {
  // Per device: a plan holds the kernel as loaded on its device.
  std::string key(reinterpret_cast<const char*>(&device), sizeof device);
  key.push_back(with_kernel ? 'k' : '-');
  const bool keyed = e.form != EagerOp::Form::Out && call_key(op.schema(), args, &key);
  if (keyed) {
    std::shared_ptr<const CallPlan> plan;
    {
      PlanCache& c = plan_cache();
      std::lock_guard<std::mutex> lock(c.mutex);
      auto it = c.plans.find(key);
      if (it != c.plans.end()) plan = it->second;
    }
    if (plan) {
      outs->clear();
      if (e.form == EagerOp::Form::Functional) {
        for (const auto& m : plan->results)
          outs->push_back(m.defined ? empty_compiled_buffer(m.sizes, m.strides, m.dtype, device) : at::Tensor());
      } else {
        outs->push_back(args[e.out_arg].toTensor());
      }
      return plan;
    }
  }
  *outs = outputs_of(op, e, e.meta_function, device, args);
  std::string why;
  std::optional<EagerGraph> graph = eager_graph(e, op.schema(), args, *outs, &why);
  if (!graph) {
    record_declined(e, why);
    return nullptr;
  }
  std::shared_ptr<EagerKernel> k;
  if (with_kernel) {
    k = kernel_for(e.name, graph->json, device);
    if (!k->ok) return nullptr;
  }
  auto plan = make_plan(e, args, *outs, *graph, k);
  if (plan && keyed) {
    PlanCache& c = plan_cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.plans.size() > 16384) c.plans.clear();  // bounded: shapes come and go
    c.plans.emplace(std::move(key), plan);
  }
  return plan;  // null only if the graph had operands of its own: never
}

void launch_call(const CallPlan& plan, c10::ArrayRef<c10::IValue> args, const std::vector<at::Tensor>& outs,
                 c10::DeviceIndex device) {
  bool writes = false;  // a reduction of empty rows still writes its output
  for (const auto& t : outs) writes |= t.defined() && t.numel() > 0;
  TORCH_INTERNAL_ASSERT(plan.kernel, "eager kernel of ", plan.name, " launched from a plan without one");
  count_launch(plan.name);
  if (!writes) return;
  for (const auto& st : plan.kernel->steps) {
    std::vector<at::Tensor> buffers;
    buffers.reserve(st.bindings.size());
    for (int i : st.bindings) buffers.push_back(source(plan, i, args, outs));
    launch_compiled_kernel(st.handles[device], buffers, plan.symbols);
  }
}

namespace {

// A 0-dim CPU tensor beside neuron tensors (x / torch.tensor(8.0)) is a
// scalar to the op, as on CUDA: it moves to the device, where it promotes
// as it did on the CPU (both are 0-dim tensors; a Python number, which
// promotes otherwise, arrives as a wrapped number and stays a scalar).
// Returns the arguments it replaced, to restore if no kernel runs.
std::vector<std::pair<size_t, c10::IValue>> move_cpu_scalars(const EagerOp& e, c10::DeviceIndex device,
                                                             torch::jit::Stack* stack, size_t num_args) {
  std::vector<std::pair<size_t, c10::IValue>> moved;
  if (e.family == EagerOp::Family::Matmul) return moved;
  const size_t first = stack->size() - num_args;
  const auto written = [&](size_t i) { return e.form == EagerOp::Form::Out && static_cast<int>(i) == e.out_arg; };
  bool beside_neuron = false;
  for (size_t i = 0; i < num_args; ++i)
    if (!written(i) && is_neuron((*stack)[first + i])) beside_neuron = true;
  if (!beside_neuron) return moved;
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (static_cast<int>(i) == e.out_arg || !v.isTensor()) continue;  // never a tensor the op writes
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || !t.device().is_cpu() || t.dim() != 0 || t.unsafeGetTensorImpl()->is_wrapped_number())
      continue;
    moved.emplace_back(i, v);
    v = t.to(c10::Device(kNeuron, device));
  }
  return moved;
}

// The kernel for the call on the stack, run; false (nothing done) when
// there is none.
bool run_eager_kernel_on_stack(const c10::OperatorHandle& op, const EagerOp& e, c10::DeviceIndex device,
                               torch::jit::Stack* stack, size_t num_args) {
  c10::ArrayRef<c10::IValue> args(stack->data() + stack->size() - num_args, num_args);
  if (e.form != EagerOp::Form::Functional && !is_neuron(args[e.out_arg])) return false;
  if (e.form != EagerOp::Form::Functional && !overlap_is_safe(e, args, args[e.out_arg].toTensor())) return false;
  std::vector<at::Tensor> outs;
  if (e.family == EagerOp::Family::Matmul) {
    outs = outputs_of(op, e, e.meta_function, device, args);
    if (!run_matmul(e, args, outs[0], device)) return false;
    record_library_launch(e);
  } else {
    std::shared_ptr<const CallPlan> plan = plan_call(op, e, device, args, &outs);
    if (!plan) return false;
    launch_call(*plan, args, outs, device);
  }
  torch::jit::drop(*stack, num_args);
  for (auto& t : outs) stack->emplace_back(std::move(t));
  return true;
}

}  // namespace

bool run_eager_kernel(const c10::OperatorHandle& op, const OpInfo& info, c10::DeviceIndex device,
                      torch::jit::Stack* stack) {
  if (!settings().eager_kernels) return false;
  const EagerOp& e = eager_op(op);
  if (e.family == EagerOp::Family::None) return false;
  const size_t num_args = op.schema().arguments().size();
  const auto moved = move_cpu_scalars(e, device, stack, num_args);
  if (run_eager_kernel_on_stack(op, e, device, stack, num_args)) return true;
  for (const auto& [i, v] : moved) (*stack)[stack->size() - num_args + i] = v;
  return false;
}

std::vector<at::Tensor> eager_outputs(const c10::OperatorHandle& op, const EagerOp& e, c10::DeviceIndex device,
                                      c10::ArrayRef<c10::IValue> args) {
  return outputs_of(op, e, e.meta_function, device, args);
}

bool eager_overlap_is_safe(const EagerOp& e, c10::ArrayRef<c10::IValue> args, const at::Tensor& out) {
  return overlap_is_safe(e, args, out);
}

bool eager_graph_kernel_compiled(const std::string& json) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.kernels.find(json);
  return it != c.kernels.end() && it->second->done.load(std::memory_order_acquire);
}

std::shared_ptr<const EagerKernel> eager_graph_kernel(const std::string& name, const std::string& json,
                                                      c10::DeviceIndex device, size_t max_kernels) {
  std::shared_ptr<EagerKernel> k = kernel_for(name, json, device);
  if (!k->ok || (max_kernels && k->steps.size() > max_kernels)) return nullptr;
  return k;
}

void launch_eager_kernel(const EagerKernel& k, const std::string& name, const std::vector<at::Tensor>& operands,
                         const std::vector<int64_t>& symbols, c10::DeviceIndex device) {
  count_launch(name);
  for (const auto& st : k.steps) {
    std::vector<at::Tensor> buffers;
    buffers.reserve(st.bindings.size());
    for (int i : st.bindings) buffers.push_back(operands[i]);
    launch_compiled_kernel(st.handles[device], buffers, symbols);
  }
}

bool copy_as_eager_kernel(at::Tensor& dst, const at::Tensor& src) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  if (!settings().eager_kernels || dst.device() != src.device() || dst.device().type() != kNeuron) return false;
  if (dst.is_conj() || src.is_conj() || dst.is_neg() || src.is_neg()) return false;
  if (float64_without_shaders(dst) && float64_without_shaders(src)) {  // the same bits as int64
    at::Tensor bits = dst.view(at::kLong);
    return copy_as_eager_kernel(bits, src.view(at::kLong));
  }
  torch::jit::Stack stack{dst, src, false};
  return run_eager_kernel(op, op_info(op), dst.device().index(), &stack);
}

bool run_cat_as_copies(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  if (schema.name() != "aten::cat" || !schema.overload_name().empty() || !settings().eager_kernels) return false;
  const EagerOp& e = eager_op(op);
  c10::ArrayRef<c10::IValue> args(stack->data() + stack->size() - 2, 2);
  const auto tensors = args[0].toTensorVector();
  for (const auto& t : tensors)
    if (t.device().type() != kNeuron || t.is_conj() || t.is_neg()) return false;
  std::vector<at::Tensor> outs = outputs_of(op, e, e.meta_function, device, args);  // shape, dtype, errors
  at::Tensor out = outs[0];
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), out.dim());
  // Inputs that overlap the result cannot be copied into it one by one.
  for (const auto& t : tensors)
    if (t.is_alias_of(out)) return false;
  int64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.numel() == 0 && t.dim() == 1 && out.dim() != 1) continue;  // legacy empty inputs are skipped
    const int64_t n = t.size(dim);
    at::Tensor slice = out.narrow(dim, offset, n);
    if (t.numel() > 0 && !copy_as_eager_kernel(slice, t)) return false;
    offset += n;
  }
  torch::jit::drop(*stack, 2);
  stack->emplace_back(std::move(out));
  return true;
}

std::string eager_kernel_declined(const std::string& op) { return t_declined.first == op ? t_declined.second : ""; }

void record_decomposition(const std::string& op) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto& record = c.records["decomposition: " + op];
  record.op = "decomposition: " + op;
  ++record.launches;
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
