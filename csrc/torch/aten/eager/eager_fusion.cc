#include "torch/aten/eager/eager_fusion.h"

#include <c10/core/TensorImpl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/Context.h>

#include "compiler/codegen/cpp_kernel.h"
#include "hal/driver.h"
#include "torch/aten/eager/background_builds.h"
#include "torch/aten/eager/eager_graph.h"
#include "torch/aten/eager/eager_kernel.h"
#include "torch/aten/eager/held_call.h"
#include "torch/aten/eager/held_call_on_host.h"
#include "torch/aten/eager/tensor_alias.h"
#include "torch/aten/router.h"
#include "torch/runtime/device.h"
#include "torch/runtime/settings.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {
namespace {

// Longer chains are flushed: one kernel's arguments stay few, and a chain's
// held results do not pile up.
constexpr size_t kMaxHeld = 32;
constexpr int kMaxDevices = 64;

// A call held back. Results of earlier calls of the chain are referenced
// by call, not held: the caller alone decides whether a result lives, and
// one nobody holds when the chain runs is never written.
struct Held {
  const EagerOp* op = nullptr;
  const c10::FunctionSchema* schema = nullptr;
  std::vector<c10::IValue> args;  // a chain result's place left None
  std::vector<int> result_of;     // per argument: the call whose result it is (-1: none)
  std::vector<TensorKey> keys;    // its neuron tensors as at the call (arguments, then result)
  bool fresh = false;             // the result is new (a functional call), else it is `self`
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> result{
      c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  at::Tensor self;       // an in-place call's result
  c10::Storage storage;  // the result's memory, kept for a later call that reads it unfused
  c10::DispatchKeySet key_set;
  std::shared_ptr<const CallPlan> plan;  // the call's own kernel (run when it is not fused)
};

struct Chain {
  std::mutex mutex;
  std::vector<Held> calls;
  c10::Stream stream{c10::Stream::DEFAULT, c10::Device(kNeuron, 0)};
  std::vector<int64_t> shape;
  std::vector<TensorKey> read, written;
  std::vector<int> writer;  // per written key, the call that last wrote it
};

struct Stats {
  std::atomic<int64_t> held{0}, chains{0}, fused_kernels{0}, fused_calls{0}, unfused{0}, dead_results{0},
      awaiting_build{0};
};

Stats& stats() {
  static auto* s = new Stats();
  return *s;
}

std::atomic<int64_t> g_pending{0};  // calls held on every device
thread_local bool t_flushing = false;

Chain& chain(c10::DeviceIndex device) {
  static std::array<std::atomic<Chain*>, kMaxDevices> chains{};
  TORCH_INTERNAL_ASSERT(device >= 0 && device < kMaxDevices);
  Chain* c = chains[device].load();
  if (!c) {
    auto* fresh = new Chain();  // leaked: held work may run during exit
    if (!chains[device].compare_exchange_strong(c, fresh)) delete fresh;
    else c = fresh;
  }
  return *c;
}

bool is_neuron(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == kNeuron;
}

bool worth_holding(c10::DeviceIndex device, c10::ArrayRef<c10::IValue> args) {
  static std::array<std::atomic<int8_t>, kMaxDevices> cpp_target{};  // 0 unknown, 1 yes, 2 no
  std::atomic<int8_t>& known = cpp_target[device];
  if (known.load(std::memory_order_relaxed) == 0)
    known.store(hal::driver().properties(device).kernel_target == "cpp" ? 1 : 2, std::memory_order_relaxed);
  if (known.load(std::memory_order_relaxed) == 2) return true;
  int64_t elements = 0;
  for (const auto& v : args)
    if (v.isTensor() && v.toTensor().defined()) elements = std::max(elements, v.toTensor().numel());
  return elements >= kMinHeldElementsOnCpp;
}

// Arguments a held call can take: dense neuron tensors seen as they are
// (no lazy conjugate or negation), Python numbers, other values.
bool holdable_arguments(c10::ArrayRef<c10::IValue> args) {
  for (const auto& v : args) {
    if (v.isTensorList() || (v.isList() && !v.isIntList() && !v.isBoolList() && !v.isDoubleList())) return false;
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const at::Tensor& t = v.toTensor();
    if (t.device().type() != kNeuron) {
      if (!t.unsafeGetTensorImpl()->is_wrapped_number()) return false;
      continue;
    }
    if (t.layout() != c10::kStrided || t.is_conj() || t.is_neg() || t.is_quantized()) return false;
  }
  return true;
}

// Whether a call reading `reads` and writing `write` may join the chain:
// memory the chain writes is read and written through one view only, so a
// fused kernel sees every element where eager would.
bool conflicts(const Chain& ch, const std::vector<TensorKey>& reads, const TensorKey& write) {
  for (const auto& r : reads)
    for (const auto& w : ch.written)
      if (w.storage == r.storage && !(w == r)) return true;
  for (const auto* list : {&ch.read, &ch.written})
    for (const auto& t : *list)
      if (t.storage == write.storage && !(t == write)) return true;
  return false;
}

void add_key(std::vector<TensorKey>& keys, const TensorKey& k) {
  for (const auto& e : keys)
    if (e == k) return;
  keys.push_back(k);
}

// Whether the call reads a result of the chain. One that does not starts a
// chain of its own: chains then follow the program's dependencies (a loop's
// iterations are not run together, cut wherever the length limit falls,
// which would give every cut its own kernel).
bool depends_on(const Chain& ch, const std::vector<TensorKey>& reads) {
  for (const auto& r : reads)
    for (const auto& w : ch.written)
      if (w == r) return true;
  return false;
}

// The one neuron tensor a reduction called with `args` reads, or null.
const at::Tensor* reduced_tensor(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor* input = nullptr;
  for (const auto& v : args)
    if (is_neuron(v)) {
      if (input) return nullptr;
      input = &v.toTensor();
    }
  return input;
}

// Whether a reduction of `input` on `stream` can join the chain: it reads a
// result of the chain over the chain's shape.
bool joins_chain(const Chain& ch, const at::Tensor& input, const c10::Stream& stream) {
  return !ch.calls.empty() && ch.stream == stream && input.sizes() == c10::IntArrayRef(ch.shape) &&
         depends_on(ch, {key_of(input)});
}

// Whether a pointwise call reads a reduction's result of the chain that
// dropped its reduced dims: broadcast, its values would not line up with
// the rows they were reduced from, as a result kept with keepdim does.
bool reads_a_dropped_row(const Chain& ch, const std::vector<TensorKey>& reads) {
  for (const auto& r : reads)
    for (const auto& w : ch.written)
      if (w == r && r.sizes.size() != ch.shape.size()) return true;
  return false;
}

// A tensor over `storage` seen as `k` (a result's surrogate once its
// tensor is gone, or a tensor as it was before an in-place view op).
at::Tensor seen_as(const c10::Storage& storage, const TensorKey& k, c10::DispatchKeySet ks) {
  return alias_of_storage(storage, ks, c10::scalarTypeToTypeMeta(k.dtype), k.sizes, k.strides, k.offset);
}

at::Tensor as_held(const at::Tensor& t, const TensorKey& k) {
  return key_of(t) == k ? t : seen_as(t.storage(), k, t.key_set());
}

// The chain's calls with their tensors back: results as their tensors (or
// surrogates, when nobody holds them: `store` false), arguments as they
// were at the call.
std::vector<HeldCall> materialize(const std::vector<Held>& calls) {
  std::vector<HeldCall> out(calls.size());
  for (size_t c = 0; c < calls.size(); ++c) {
    const Held& h = calls[c];
    HeldCall& call = out[c];
    call.op = h.op;
    call.schema = h.schema;
    if (!h.fresh) {
      call.out = as_held(h.self, h.keys.back());
    } else if (auto alive = h.result.lock()) {
      call.out = as_held(at::Tensor(std::move(alive)), h.keys.back());
    } else {
      // Nobody holds the tensor; another view of its memory still counts.
      call.store = h.storage.use_count() > 1;
      call.out = seen_as(h.storage, h.keys.back(), h.key_set);
    }
    call.args = h.args;
    size_t j = 0;
    for (size_t i = 0; i < call.args.size(); ++i) {
      if (h.result_of[i] >= 0) {
        call.args[i] = out[h.result_of[i]].out;
        ++j;
      } else if (is_neuron(call.args[i])) {
        call.args[i] = as_held(call.args[i].toTensor(), h.keys[j++]);
      }
    }
  }
  return out;
}

std::string chain_name(const std::vector<HeldCall>& calls) {
  std::string name = "fused(" + std::to_string(calls.size()) + "):";
  for (const HeldCall& c : calls) name += " " + c.op->name.substr(6);
  return name;
}

// The call's own kernel, on the call's tensors as they were (ATen's CPU
// kernel on host memory).
void run_alone(const Held& h, const HeldCall& call, c10::DeviceIndex device) {
  if (run_held_call_on_host(call, device)) return;
  launch_call(*h.plan, call.args, {call.out}, device);
}

bool is_reduction(const HeldCall& call) { return call.op->family == EagerOp::Family::Reduction; }

// The shape the calls run over: a reduction's input's, the others' result's.
c10::IntArrayRef chain_shape(const HeldCall& first) {
  if (!is_reduction(first)) return first.out.sizes();
  return reduced_tensor(first.args)->sizes();
}

// A chain seen before: the same calls, on tensors of the same dtypes,
// sizes, strides and aliasing, with the same numbers, storing the same
// results, make the same graph. Its plan keeps the graph's kernel (or that
// it has none), symbols and operands' places, so a chain run in a loop
// skips writing the graph and looking its kernel up (most of a flush's
// host time: 8K-element chains of 5 ops cost more fused than unfused).
struct ChainPlan {
  // kBuilding: the kernel builds in the background (background_builds.h);
  // kNone: the chain does not run as one kernel. `kernel` is set before
  // `state` leaves kBuilding.
  enum State : int { kReady, kNone, kBuilding };
  std::atomic<int> state{kNone};
  std::shared_ptr<const EagerKernel> kernel;
  std::vector<std::pair<int, int>> sources;  // per operand: the call and argument (-1: result)
  std::vector<int64_t> symbols;
  std::string name;
};

struct ChainPlans {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const ChainPlan>> plans;
  std::unordered_map<std::string, int> runs_by_ops;  // chains' runs before a plan, by their ops alone
};

// Whether a chain's kernel may build off the calling thread: where its
// calls run unfused at ATen's speed meanwhile (host memory), unless the
// user asked for synchronous builds or for deterministic algorithms (whether
// an early call ran fused would depend on the compiler's timing).
bool builds_in_background() {
  return settings().eager_fusion_background_builds && host_addressable() &&
         !at::globalContext().deterministicAlgorithms();
}

ChainPlans& chain_plans() {
  static auto* p = new ChainPlans();  // leaked, as the chains
  return *p;
}

// Whether a chain builds its kernel now. Off the calling thread, a chain
// builds once its ops (in this order, any shapes) run a second time: a
// chain that runs once (a script's setup, a one-off computation) costs no
// compiler process; a loop's chains build from its second iteration.
bool repeats(const std::vector<HeldCall>& calls, ChainPlans& plans) {
  if (!builds_in_background()) return true;
  std::string ops;
  for (const HeldCall& c : calls) ops.append(reinterpret_cast<const char*>(&c.schema), sizeof c.schema);
  std::lock_guard<std::mutex> lock(plans.mutex);
  if (plans.runs_by_ops.size() > 4096) plans.runs_by_ops.clear();  // bounded, as the plans
  return ++plans.runs_by_ops[ops] >= 2;
}

// The chain's key; false when a call's arguments have none. Tensors enter
// it by their metadata (call_key) and by which earlier tensor of the chain
// they are (equal TensorKeys are one value to the graph).
bool chain_key(const std::vector<HeldCall>& calls, c10::DeviceIndex device, std::string* key) {
  key->append(reinterpret_cast<const char*>(&device), sizeof device);
  std::vector<TensorKey> seen;
  auto place = [&](const at::Tensor& t) {
    const TensorKey k = key_of(t);
    int32_t i = 0;
    while (i < static_cast<int32_t>(seen.size()) && !(seen[i] == k)) ++i;
    if (i == static_cast<int32_t>(seen.size())) seen.push_back(k);
    key->append(reinterpret_cast<const char*>(&i), sizeof i);
  };
  for (const HeldCall& c : calls) {
    if (!call_key(*c.schema, c.args, key)) return false;
    for (const auto& v : c.args)
      if (is_neuron(v)) place(v.toTensor());
    place(c.out);
    const int64_t out_facts[] = {static_cast<int64_t>(c.out.scalar_type()), c.out.dim(), c.store};
    key->append(reinterpret_cast<const char*>(out_facts), sizeof out_facts);
    key->append(reinterpret_cast<const char*>(c.out.sizes().data()), c.out.dim() * sizeof(int64_t));
    key->append(reinterpret_cast<const char*>(c.out.strides().data()), c.out.dim() * sizeof(int64_t));
  }
  return true;
}

std::shared_ptr<const ChainPlan> plan_chain(const std::vector<HeldCall>& calls, c10::DeviceIndex device) {
  auto plan = std::make_shared<ChainPlan>();
  std::string why;
  // The C++ target's row kernels keep a row's costly values (softmax's exp)
  // for the passes after its reduction; the GLSL target's compute them again.
  const bool cpp = hal::driver().properties(device).kernel_target == "cpp";
  auto fused = fused_graph(calls, chain_shape(calls[0]), cpp ? compiler::kRowCacheMax : 0, &why);
  if (!fused) return plan;
  // An in-place call stores over memory the chain also reads as an
  // input: only one kernel, reading each element before writing it, may
  // run such a graph (several would run in order, a later one reading
  // what an earlier one stored).
  bool in_place = false;
  for (const auto& c : calls) in_place |= c.op->form == EagerOp::Form::InPlace;
  plan->name = chain_name(calls);
  plan->sources = std::move(fused->sources);
  plan->symbols = std::move(fused->symbols);
  for (size_t j = 0; j < plan->sources.size(); ++j) {
    const auto [c, i] = plan->sources[j];
    const at::Tensor& t = i < 0 ? calls[c].out : calls[c].args[i].toTensor();
    TORCH_INTERNAL_ASSERT(t.unsafeGetTensorImpl() == fused->operands[j].unsafeGetTensorImpl(),
                          "a fused graph's operand is not the tensor its source names");
  }
  const size_t max_kernels = in_place ? 1 : 0;
  if (!builds_in_background() || eager_graph_kernel_compiled(fused->json)) {  // (a new shape's chain: built)
    plan->kernel = eager_graph_kernel(plan->name, fused->json, device, max_kernels);
    plan->state = plan->kernel ? ChainPlan::kReady : ChainPlan::kNone;
    return plan;
  }
  plan->state = ChainPlan::kBuilding;
  build_in_background([plan, json = std::move(fused->json), device, max_kernels] {
    try {
      plan->kernel = eager_graph_kernel(plan->name, json, device, max_kernels);
    } catch (const std::exception& e) {  // (the chain keeps running call by call)
      TORCH_WARN("eager fusion: the kernel of ", plan->name, " failed to build: ", e.what());
    }
    plan->state.store(plan->kernel ? ChainPlan::kReady : ChainPlan::kNone, std::memory_order_release);
  });
  return plan;
}

enum class Fused { kRan, kCannot, kBuilding };

// Runs calls (two or more) as one kernel, or says why not: the compiler
// cannot, or the kernel is not built yet (building, or the chain has not
// repeated yet: the calls then run alone).
Fused run_fused(const std::vector<HeldCall>& calls, c10::DeviceIndex device) {
  std::string key;
  const bool keyed = chain_key(calls, device, &key);
  std::shared_ptr<const ChainPlan> plan;
  ChainPlans& plans = chain_plans();
  if (keyed) {
    std::lock_guard<std::mutex> lock(plans.mutex);
    auto it = plans.plans.find(key);
    if (it != plans.plans.end()) plan = it->second;
  }
  if (!plan) {
    if (!repeats(calls, plans)) return Fused::kBuilding;  // (runs call by call, as while building)
    plan = plan_chain(calls, device);
    if (keyed) {
      std::lock_guard<std::mutex> lock(plans.mutex);
      if (plans.plans.size() > 4096) plans.plans.clear();  // bounded: shapes come and go
      plans.plans.emplace(std::move(key), plan);
    }
  }
  const int state = plan->state.load(std::memory_order_acquire);
  if (state == ChainPlan::kBuilding) return Fused::kBuilding;
  if (state == ChainPlan::kNone) return Fused::kCannot;
  std::vector<at::Tensor> operands;
  operands.reserve(plan->sources.size());
  for (const auto& [c, i] : plan->sources) operands.push_back(i < 0 ? calls[c].out : calls[c].args[i].toTensor());
  launch_eager_kernel(*plan->kernel, plan->name, operands, plan->symbols, device);
  Stats& s = stats();
  ++s.fused_kernels;
  s.fused_calls += static_cast<int64_t>(calls.size());
  return Fused::kRan;
}

// Results of calls before `from` that calls from `from` on read: stored,
// since those calls now read them from memory.
void store_values_read_from(const std::vector<Held>& held, std::vector<HeldCall>& calls, size_t from) {
  for (size_t c = from; c < calls.size(); ++c)
    for (int w : held[c].result_of)
      if (w >= 0 && static_cast<size_t>(w) < from) calls[w].store = true;
}

// Runs calls [begin, end) as one kernel where the compiler can; else cut
// after the first reduction with calls after it, each piece run the same
// way; a piece ending in a reduction it cannot fuse runs that reduction
// apart, after its pointwise calls. (Softmax as 5 ops where the target
// would compute exp again in the last pass: amax | sub, exp, sum storing
// exp | div. Cut after the sum instead, exp would be stored from an
// epilogue pass that computes it again: the compiler writes only stores
// needing no reduction from a reduction's loop.)
void run_piece(const std::vector<Held>& held, std::vector<HeldCall>& calls, size_t begin, size_t end,
               c10::DeviceIndex device) {
  auto slice = [&](size_t b, size_t e) { return std::vector<HeldCall>(calls.begin() + b, calls.begin() + e); };
  Stats& s = stats();
  if (end - begin > 1) {
    const Fused fused = run_fused(slice(begin, end), device);
    if (fused == Fused::kRan) return;
    if (fused == Fused::kBuilding) {
      ++s.awaiting_build;
      for (size_t c = begin; c < end; ++c) run_alone(held[c], calls[c], device);
      return;
    }
  }
  size_t cut = begin;
  while (cut < end && !is_reduction(calls[cut])) ++cut;
  if (cut + 1 < end) {
    store_values_read_from(held, calls, cut + 1);
    run_piece(held, calls, begin, cut + 1, device);
    run_piece(held, calls, cut + 1, end, device);
    return;
  }
  if (cut + 1 == end && end - begin > 1) {
    store_values_read_from(held, calls, cut);
    const Fused prefix = cut - begin == 1 ? Fused::kCannot : run_fused(slice(begin, cut), device);
    if (prefix != Fused::kRan) {
      ++(prefix == Fused::kBuilding ? s.awaiting_build : s.unfused);
      for (size_t c = begin; c < cut; ++c) run_alone(held[c], calls[c], device);
    }
    run_alone(held[cut], calls[cut], device);
    return;
  }
  if (end - begin > 1) ++s.unfused;
  for (size_t c = begin; c < end; ++c) run_alone(held[c], calls[c], device);
}

void run_chain(const std::vector<Held>& held, c10::DeviceIndex device) {
  Stats& s = stats();
  ++s.chains;
  std::vector<HeldCall> calls = materialize(held);
  bool used = false;  // nothing can observe a chain whose results nobody holds
  for (const auto& c : calls) used |= c.store;
  if (!used) {
    s.dead_results += static_cast<int64_t>(calls.size());
    return;
  }
  if (calls.size() > 1)
    for (const auto& c : calls) s.dead_results += !c.store;
  run_piece(held, calls, 0, calls.size(), device);
}

// Runs the chain's calls, on the stream they were made on.
void flush_locked(Chain& ch, c10::DeviceIndex device) {
  if (ch.calls.empty()) return;
  std::vector<Held> calls = std::move(ch.calls);
  ch.calls.clear();
  ch.read.clear();
  ch.written.clear();
  ch.writer.clear();
  const bool was_flushing = t_flushing;
  t_flushing = true;
  const c10::Stream previous = exchange_stream(ch.stream);
  // Counted as pending until launched: another thread's flush must not
  // find nothing held and read memory these kernels are about to write.
  auto done = [&] {
    exchange_stream(previous);
    t_flushing = was_flushing;
    g_pending -= static_cast<int64_t>(calls.size());
  };
  try {
    run_chain(calls, device);
  } catch (...) {
    done();
    throw;
  }
  done();
}

void flush_device(c10::DeviceIndex device) {
  Chain& ch = chain(device);
  std::lock_guard<std::mutex> lock(ch.mutex);
  flush_locked(ch, device);
}

}  // namespace

bool hold_for_fusion(const c10::OperatorHandle& op, const OpInfo&, c10::DeviceIndex device,
                     torch::jit::Stack* stack) {
  if (t_flushing || !eager_fusion_enabled() || !settings().eager_kernels) return false;
  const EagerOp& e = eager_op(op);
  // A reduction joins a chain (reading one of its results over the chain's
  // shape) or starts one (softmax's amax); later calls over that shape may
  // read its result (kept with keepdim): the chain runs as one kernel of
  // passes over each row.
  const bool reduction = e.family == EagerOp::Family::Reduction && e.form == EagerOp::Form::Functional;
  if ((e.family != EagerOp::Family::Pointwise && !reduction) || e.form == EagerOp::Form::Out || e.results != 1)
    return false;
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  c10::ArrayRef<c10::IValue> args(stack->data() + stack->size() - num_args, num_args);
  if (!holdable_arguments(args) || !worth_holding(device, args)) return false;
  const bool in_place = e.form == EagerOp::Form::InPlace;
  if (in_place && (!is_neuron(args[e.out_arg]) || !eager_overlap_is_safe(e, args, args[e.out_arg].toTensor())))
    return false;
  Chain& ch = chain(device);
  std::lock_guard<std::mutex> lock(ch.mutex);
  const c10::Stream stream = current_stream(device);
  const at::Tensor* reduced = reduction ? reduced_tensor(args) : nullptr;
  if (reduction && !reduced) return false;
  if (reduction && !joins_chain(ch, *reduced, stream)) flush_locked(ch, device);
  std::vector<at::Tensor> outs;
  // (A call that would run ATen's kernel unfused needs no kernel of its own.)
  auto plan = plan_call(op, e, device, args, &outs, !runs_held_calls_on_host(schema, e));  // raises here, at the call
  if (!plan || outs.size() != 1 || !outs[0].defined() || outs[0].numel() == 0) return false;
  const at::Tensor& out = outs[0];

  Held h;
  for (const auto& v : args)
    if (is_neuron(v)) h.keys.push_back(key_of(v.toTensor()));
  std::vector<TensorKey> reads = h.keys;
  h.keys.push_back(key_of(out));
  if (reduction) {
    if (conflicts(ch, reads, h.keys.back())) return false;  // (the router flushes, then runs it alone)
  } else if (!ch.calls.empty() &&
             (ch.stream != stream || out.sizes() != c10::IntArrayRef(ch.shape) || !depends_on(ch, reads) ||
              reads_a_dropped_row(ch, reads) || conflicts(ch, reads, h.keys.back()))) {
    flush_locked(ch, device);
  }
  if (ch.calls.empty()) {
    ch.stream = stream;
    ch.shape = (reduction ? *reduced : out).sizes().vec();
  }
  h.op = &e;
  h.schema = &schema;
  h.args.assign(args.begin(), args.end());
  h.result_of.assign(args.size(), -1);
  for (size_t i = 0, j = 0; i < args.size(); ++i) {
    if (!is_neuron(args[i])) continue;
    const TensorKey& k = h.keys[j++];
    for (size_t w = 0; w < ch.written.size(); ++w)
      if (ch.written[w] == k) {
        h.result_of[i] = ch.writer[w];
        h.args[i] = c10::IValue();
      }
  }
  for (const auto& k : reads) add_key(ch.read, k);
  bool rewritten = false;
  for (size_t w = 0; w < ch.written.size(); ++w)
    if (ch.written[w] == h.keys.back()) {
      ch.writer[w] = static_cast<int>(ch.calls.size());
      rewritten = true;
    }
  if (!rewritten) {
    ch.written.push_back(h.keys.back());
    ch.writer.push_back(static_cast<int>(ch.calls.size()));
  }
  h.fresh = !in_place;
  if (h.fresh) h.result = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(out.getIntrusivePtr());
  else h.self = out;
  h.storage = out.storage();
  h.key_set = out.key_set();
  h.plan = std::move(plan);
  ch.calls.push_back(std::move(h));
  ++g_pending;
  ++stats().held;
  if (ch.calls.size() >= kMaxHeld) flush_locked(ch, device);
  torch::jit::drop(*stack, num_args);
  stack->emplace_back(std::move(outs[0]));
  return true;
}

bool hold_copy_for_fusion(at::Tensor& dst, const at::Tensor& src) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  if (t_flushing || !eager_fusion_enabled()) return false;
  torch::jit::Stack stack{dst, src, false};
  return hold_for_fusion(op, op_info(op), dst.device().index(), &stack);
}

void flush_held_calls(c10::DeviceIndex device) {
  if (g_pending.load(std::memory_order_acquire) == 0 || t_flushing) return;
  if (device >= 0) {
    flush_device(device);
    return;
  }
  for (c10::DeviceIndex d = 0; d < device_count() && d < kMaxDevices; ++d) flush_device(d);
}

bool eager_fusion_enabled() {
  return settings().eager_fusion;
}

void set_eager_fusion(bool enabled) {
  flush_held_calls(-1);
  set_eager_fusion_setting(enabled);
}

EagerFusionStats eager_fusion_stats() {
  Stats& s = stats();
  return {s.held.load(),   s.chains.load(),       s.fused_kernels.load(),         s.fused_calls.load(),
          s.unfused.load(), s.dead_results.load(), s.awaiting_build.load()};
}

void reset_eager_fusion_stats() {
  Stats& s = stats();
  s.held = s.chains = s.fused_kernels = s.fused_calls = s.unfused = s.dead_results = s.awaiting_build = 0;
}

}  // namespace openneuron::integration
