// CPU tensors for handing neuron tensors to a CPU transport (Gloo). Where
// the host can address device memory they alias it (no copy; each alias
// keeps the neuron storage alive for as long as the transport holds it).
// Otherwise they are staged copies, made through the driver: the collective
// takes them with take_staged() and writes its outputs back when it ends.
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

// The staged copies made on this thread since the last call, as (neuron
// tensor, CPU copy) pairs: a collective calls it once its host tensors are
// made.
std::vector<std::pair<at::Tensor, at::Tensor>> take_staged();

}  // namespace openneuron::integration
