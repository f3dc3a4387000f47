// CPU tensors that alias neuron tensors' device memory, for handing neuron
// tensors to a CPU transport (Gloo) with no copy. Each alias keeps the neuron
// storage alive for as long as the transport holds it.
#pragma once

#include <string>
#include <vector>

#include <ATen/Tensor.h>

namespace openneuron::integration {

// For a neuron tensor: waits for work queued on its device's current stream
// and returns the CPU alias. A CPU tensor is returned as is; any other device
// is an error naming `collective`.
at::Tensor host_alias(const at::Tensor& t, const char* collective);
std::vector<at::Tensor> host_aliases(const std::vector<at::Tensor>& tensors,
                                     const char* collective);
std::vector<std::vector<at::Tensor>> host_aliases(
    const std::vector<std::vector<at::Tensor>>& lists, const char* collective);

}  // namespace openneuron::integration
