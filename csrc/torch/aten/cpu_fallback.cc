#include "torch/aten/cpu_fallback.h"

#include <chrono>
#include <exception>
#include <map>
#include <mutex>

#include <c10/util/Exception.h>

#include "torch/aten/copying_call.h"
#include "torch/aten/cuda_dtypes.h"
#include "torch/aten/eager/eager_kernel.h"
#include "torch/runtime/settings.h"
#include "torch/runtime/sync_debug.h"

namespace openneuron::integration {
namespace {

struct Report {
  std::mutex mutex;
  std::map<std::string, FallbackRecord> records;
};

Report& report() {
  static auto* r = new Report();
  return *r;
}

// Returns true the first time `op` falls back (for warn-once).
bool record_call(const std::string& op, double seconds) {
  auto& r = report();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& rec = r.records[op];
  rec.op = op;
  rec.calls += 1;
  rec.seconds += seconds;
  return rec.calls == 1;
}

}  // namespace

CpuFallbackScope::CpuFallbackScope(std::string op)
    : op_(std::move(op)),
      start_(std::chrono::steady_clock::now()),
      cause_(Cause::CpuFallback),
      unwinding_(std::uncaught_exceptions()) {
  if (settings().cpu_fallback != FallbackPolicy::Error) return;
  const std::string why = eager_kernel_declined(op_);
  TORCH_CHECK_NOT_IMPLEMENTED(false, op_,
                              " would run on the CPU with copies (CPU fallback), and "
                              "OPENNEURON_CPU_FALLBACK=error forbids it.",
                              why.empty() ? "" : " It has no device kernel: " + why + ".");
}

CpuFallbackScope::~CpuFallbackScope() {
  if (std::uncaught_exceptions() > unwinding_) return;  // the call failed: not a fallback run
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
  const bool first = record_call(op_, took.count());
  if (first && settings().cpu_fallback == FallbackPolicy::Warn) {
    const std::string why = eager_kernel_declined(op_);
    TORCH_WARN(op_,
               " ran on the CPU with copies to and from the neuron device (CPU "
               "fallback)",
               why.empty() ? "" : " (no device kernel: " + why + ")",
               ". See torch.neuron.fallback_report(); set "
               "OPENNEURON_CPU_FALLBACK=silent or error to change this "
               "warning.");
  }
}

void run_on_cpu_with_copies(const c10::OperatorHandle& op, const OpInfo& info,
                            torch::jit::Stack* stack) {
  const size_t first = stack->size() - op.schema().arguments().size();
  const std::vector<c10::IValue> args(stack->begin() + first, stack->end());
  std::exception_ptr dtype_gap;
  try {
    CpuFallbackScope scope(info.name);
    note_host_sync(info.name.c_str(), "it runs on the CPU fallback, after the device's queued work");
    call_with_cpu_copies(op, stack);
    return;
  } catch (const c10::Error& e) {
    if (!is_cpu_dtype_gap(op, e)) throw;
    dtype_gap = std::current_exception();
  }
  // The CPU kernel lacks a dtype that CUDA has (integer histc, as MoE
  // routers call it): the op runs on the neuron tensors as CUDA would.
  stack->resize(first);
  stack->insert(stack->end(), args.begin(), args.end());
  if (!run_with_cuda_dtypes(op, stack)) std::rethrow_exception(dtype_gap);
}

std::vector<FallbackRecord> fallback_report() {
  auto& r = report();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<FallbackRecord> out;
  for (auto& [name, rec] : r.records) out.push_back(rec);
  return out;
}

void reset_fallback_report() {
  auto& r = report();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.records.clear();
}

}  // namespace openneuron::integration
