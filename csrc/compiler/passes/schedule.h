// Fusion and scheduling: which nodes get buffers, which nodes are computed
// together in one generated kernel, in what order kernels and extern calls
// run, and which buffers can reuse the memory of dead ones.
#pragma once

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace openneuron::compiler {

// A fused kernel. Pointwise: every root has shape `shape` and is computed in
// one loop nest. Reduction: `shape` is the reduced input's shape, `dims` the
// reduced dims; roots are reductions over the row, pointwise outputs of the
// input's shape (epilogues) or of the reduced shape (row scalars).
struct KernelGroup {
  enum class Kind { Pointwise, Reduction } kind = Kind::Pointwise;
  std::vector<Expr> shape;
  std::vector<int64_t> dims;
  std::vector<Node*> roots;   // in evaluation order
  int position = 0;           // step index
};

struct Step {
  enum class Kind { Kernel, Extern, Alias } kind = Kind::Kernel;
  int group = -1;        // Kernel
  Node* node = nullptr;  // Extern: the extern node; Alias: the view node
};

struct Schedule {
  std::vector<KernelGroup> groups;
  std::vector<Step> steps;
  // node id -> node whose buffer it reuses (memory planning), or -1.
  std::vector<int> reuse_of;
  // Per step: node ids whose buffers die after it.
  std::vector<std::vector<int>> frees;
  int buffers_reused = 0;
};

// Thrown when an FX node lowered to generated code must be an extern call
// after all: a store into a graph input (Node::store_into) that cannot write
// in place (another step, or another element in its own kernel, still reads
// the input's old value), or a host value (Node::host) needed as a tensor
// (a graph output, an extern's argument). Compilation restarts with that
// node run as an extern.
struct ExternNeeded : std::runtime_error {
  ExternNeeded(const std::string& fx_name, const std::string& why)
      : std::runtime_error(why + " at " + fx_name), fx_name(fx_name) {}
  std::string fx_name;
};

// Decides materialization, fuses compute nodes into kernel groups and orders
// the steps. Views of materialized tensors that externs or outputs need
// become Alias steps (as_strided views, no copy) when expressible.
// Roots in `isolate` start a kernel of their own (see FusionConflict).
Schedule schedule_graph(Graph& g, const std::set<int>& isolate = {});

// Strides of a view chain over a materialized base, when the view is
// expressible as a strided view of it; false otherwise.
bool strided_view(const Node* view, const Node** base, std::vector<Expr>* strides, Expr* offset);

}  // namespace openneuron::compiler
