// CPU tensors that alias neuron tensors' device memory, for handing neuron
// tensors to a CPU transport (Gloo) with no copy. Each alias keeps the neuron
// storage alive for as long as the transport holds it.
#pragma once

#include <string>
#include <vector>

#include <ATen/Tensor.h>

namespace openneuron::integration {

// Checks `t` is a neuron tensor (naming `collective` otherwise), waits for
// work queued on its device's current stream, and returns the CPU alias.
at::Tensor host_alias(const at::Tensor& t, const char* collective);
std::vector<at::Tensor> host_aliases(const std::vector<at::Tensor>& tensors,
                                     const char* collective);
std::vector<std::vector<at::Tensor>> host_aliases(
    const std::vector<std::vector<at::Tensor>>& lists, const char* collective);

}  // namespace openneuron::integration
