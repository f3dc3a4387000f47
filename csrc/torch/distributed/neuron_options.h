// Options of a `neuron` c10d backend. PyTorch's split_group deep-copies the
// parent backend's options in Python, so this type is bound with
// __copy__/__deepcopy__ (the base Options type cannot be copied there).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace openneuron::integration {

struct NeuronBackendOptions : c10d::Backend::Options {
  explicit NeuronBackendOptions(
      std::chrono::milliseconds timeout = ::kBackendDefaultTimeout)
      : c10d::Backend::Options("neuron", timeout) {}
  NeuronBackendOptions(const NeuronBackendOptions&) = default;
};

}  // namespace openneuron::integration
