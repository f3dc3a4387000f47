// Lowering: an FX graph, as serialized by the Python front end (JSON), turned
// into the IR. ATen ops with a lowering become IR nodes; every other op
// becomes an Extern node that the runtime calls as a library kernel.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ir/json.h"

namespace openneuron::compiler {

struct LoweringNote {
  std::string op;      // the ATen op, e.g. "aten.add.Tensor"
  std::string reason;  // why it runs as an eager (extern) kernel
};

struct LoweredGraph {
  Graph graph;
  // Ops meant to be generated that fell back to eager kernels (warned).
  std::vector<LoweringNote> fallbacks;
  // Ops run as library kernels by design (matmul, convolution, ...).
  std::vector<std::string> externs;
};

// `forced_externs`: FX names of ops to run as extern calls although the
// compiler could generate them (see ExternNeeded: a `copy_` into a graph
// input that cannot write in place, a host value needed as a tensor).
// An FX node with "op_result": true (an eager call's value, not a node of
// its decomposition) that yields a 16-bit float is rounded to its dtype
// where computed (Node::rounds_to_dtype).
LoweredGraph lower_fx_graph(const Json& fx, const std::set<std::string>& forced_externs = {});

}  // namespace openneuron::compiler
