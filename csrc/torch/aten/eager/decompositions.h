// Ops whose single-op graph is their decomposition into ops the compiler
// lowers (written as PyTorch decomposes them): softmax-like row ops, GELU
// and its backward, masked_fill. Each writes the value "v".
#pragma once

#include <c10/core/ScalarType.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace openneuron::integration {

// What a decomposition needs from the graph being written (eager_graph.cc).
struct GraphWriter {
  // Appends an FX node (args as JSON text); returns a reference to it.
  std::function<std::string(const std::string& name, const std::string& target, const std::string& args,
                            const std::string& meta)> node;
  // The meta of a value over the kernel geometry, 1 along the row dims if `row`.
  std::function<std::string(at::ScalarType dtype, bool row)> meta;
  std::string dims;  // the row dims, a JSON list
};

// _softmax, _log_softmax and their backwards; `refs` the tensor arguments,
// `dtype` the input's (16-bit inputs compute in float32).
bool row_decomposition(GraphWriter& b, const std::string& target, const std::vector<std::string>& refs,
                       at::ScalarType dtype);

// gelu, gelu_backward, masked_fill; `args` every argument's text by name.
bool pointwise_decomposition(GraphWriter& b, const std::string& target,
                             const std::map<std::string, std::string>& args, at::ScalarType dtype);

}  // namespace openneuron::integration
