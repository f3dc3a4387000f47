// What the op router needs to know about an ATen operator, computed once per
// operator from its schema and cached.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

struct OpInfo {
  std::string name;             // "aten::add.Tensor"
  bool exact_same_device;       // every tensor on one device, CPU scalars too
  bool accepts_cpu_tensors;     // takes CPU tensors beside neuron ones (indices)
  bool has_mutable_args;        // in-place, out= or metadata-mutating
  bool force_cpu_fallback;      // OPENNEURON_FORCE_CPU_FALLBACK names it
  // Returns views of its inputs (transpose, diagonal, detach, split...):
  // metadata only, so it never takes the copying CPU fallback, whatever the
  // driver (a copy would break aliasing and lose writes through the view).
  bool is_view;
  // The host waits for the device's values to run it (torch.neuron
  // set_sync_debug_mode): a result whose size or value the host needs.
  enum class HostSync : uint8_t { Never, Always, WithMaskIndex } host_sync = HostSync::Never;
  std::vector<size_t> generator_args;
  // Draws random numbers (a generator argument, or native_dropout's mask):
  // on devices the host cannot address it draws on the device (random_ops.h).
  bool draws_random = false;
  int settings_generation = 0;   // settings this info was computed with
};

const OpInfo& op_info(const c10::OperatorHandle& op);

}  // namespace openneuron::integration
