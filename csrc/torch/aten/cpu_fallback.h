// The CPU-fallback path: copy the arguments to the CPU, run the op there,
// copy the results back. For drivers whose memory the host cannot address;
// on the host driver it runs only for ops forced onto it (settings.h).
// Every use is counted and timed for torch.neuron.fallback_report(), and
// follows OPENNEURON_CPU_FALLBACK: warn once per op, error, or silent.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>

#include "torch/aten/op_info.h"

namespace openneuron::integration {

void run_on_cpu_with_copies(const c10::OperatorHandle& op,
                            const OpInfo& info, torch::jit::Stack* stack);

struct FallbackRecord {
  std::string op;
  int64_t calls = 0;
  double seconds = 0;
};
std::vector<FallbackRecord> fallback_report();
void reset_fallback_report();

}  // namespace openneuron::integration
