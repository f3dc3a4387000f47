// One call of a CPU kernel on neuron tensors, for kernels written by hand
// (the router does the same for every other op): waits for queued work on
// the device's current stream, shows arguments to the kernel as CPU views,
// redirects the kernel's allocations into device memory, and turns results
// back into neuron tensors.
#pragma once

#include <optional>

#include "torch/aten/host/cpu_views.h"
#include "torch/aten/host/cpu_allocation_redirect.h"
#include "torch/runtime/device.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {

class HostCall {
 public:
  explicit HostCall(c10::DeviceIndex device)
      : views_(device), redirect_((wait_current_stream(device), device)) {}

  at::Tensor cpu(const at::Tensor& t) {
    return t.defined() && t.device().type() == kNeuron ? views_.to_cpu(t) : t;
  }
  std::optional<at::Tensor> cpu(const std::optional<at::Tensor>& t) {
    if (!t) return t;
    return cpu(*t);
  }
  at::Tensor neuron(const at::Tensor& t) { return views_.to_neuron(t); }

 private:
  CpuViews views_;
  RedirectCpuAllocations redirect_;
};

}  // namespace openneuron::integration
