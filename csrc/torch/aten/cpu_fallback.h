// The CPU-fallback path: copy the arguments to the CPU, run the op there,
// copy the results back. For drivers whose memory the host cannot address;
// on the host driver it runs only for ops forced onto it (settings.h).
// Every use is counted and timed for torch.neuron.fallback_report(), and
// follows OPENNEURON_CPU_FALLBACK: warn once per op, error, or silent.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>

#include "torch/aten/op_info.h"
#include "torch/runtime/transfer_stats.h"

namespace openneuron::integration {

void run_on_cpu_with_copies(const c10::OperatorHandle& op,
                            const OpInfo& info, torch::jit::Stack* stack);

// The same bookkeeping for a kernel written by hand that copies its own
// arguments (convolution): checks the policy when made, counts the copies
// made meanwhile as CPU-fallback transfers, and records (and warns about)
// the call when it ends.
class CpuFallbackScope {
 public:
  explicit CpuFallbackScope(std::string op);
  ~CpuFallbackScope();
  CpuFallbackScope(const CpuFallbackScope&) = delete;
  CpuFallbackScope& operator=(const CpuFallbackScope&) = delete;

 private:
  std::string op_;
  std::chrono::steady_clock::time_point start_;
  TransferCauseGuard cause_;
  int unwinding_;  // exceptions in flight when made
};

struct FallbackRecord {
  std::string op;
  int64_t calls = 0;
  double seconds = 0;
};
std::vector<FallbackRecord> fallback_report();
void reset_fallback_report();

}  // namespace openneuron::integration
