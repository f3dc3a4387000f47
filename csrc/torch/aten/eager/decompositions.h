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

// A value's shape over the kernel geometry: full, 1 along the row (reduced)
// dims, or 1 along the others (a column reduction: layer norm's weight grad).
enum class ValueShape { Full, Row, Column };

// What a decomposition needs from the graph being written (eager_graph.cc).
struct GraphWriter {
  // Appends an FX node (args as JSON text); returns a reference to it.
  std::function<std::string(const std::string& name, const std::string& target, const std::string& args,
                            const std::string& meta)> node;
  // The same with keyword arguments (JSON object members: "\"k\":v,...").
  std::function<std::string(const std::string& name, const std::string& target, const std::string& args,
                            const std::string& kwargs, const std::string& meta)> node_kw;
  // The meta of a value over the kernel geometry, laid out contiguously.
  std::function<std::string(at::ScalarType dtype, ValueShape shape)> meta;
  std::string dims;       // the row dims, a JSON list
  std::string lead_dims;  // the others
};

// A double as graph JSON text: NaN and infinities as the compiler's JSON
// reads them, a whole number with its point (read back as a float).
std::string json_number(double v);

// _softmax, _log_softmax and their backwards (value "v"), native_layer_norm
// and its backward (values "v0", "v1", "v2": one per result); `refs` the
// tensor arguments, `args` every argument's text by name, `dtype` the first
// input's (16-bit inputs compute in float32).
bool row_decomposition(GraphWriter& b, const std::string& target, const std::vector<std::string>& refs,
                       const std::map<std::string, std::string>& args, at::ScalarType dtype);

// gelu, gelu_backward, masked_fill, addcmul, addcdiv, lerp, and the
// activations and their backwards (pointwise_activations.cc); `args` every
// argument's text by name.
bool pointwise_decomposition(GraphWriter& b, const std::string& target,
                             const std::map<std::string, std::string>& args, at::ScalarType dtype);

// linalg_vector_norm of orders 1, 2 and +-inf, std, logsumexp (value "v",
// 1 along the reduced dims); `dtype` the value's.
// The activations and other pointwise ops written with the ops the
// compiler lowers (pointwise_activations.cc); false when `target` is not one.
bool activation_decomposition(GraphWriter& b, const std::string& target,
                              const std::map<std::string, std::string>& args, at::ScalarType dtype);

bool reduction_decomposition(GraphWriter& b, const std::string& target,
                             const std::map<std::string, std::string>& args, at::ScalarType dtype);

}  // namespace openneuron::integration
