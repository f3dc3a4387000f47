// The IR: a DAG of tensor operations with dtypes and symbolic shapes.
// It knows nothing of PyTorch: the front end lowers ATen ops into these
// node kinds, and ops it has no lowering for become Extern nodes that the
// runtime calls as library kernels inside the compiled graph.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/dtype.h"
#include "compiler/ir/expr.h"

namespace openneuron::compiler {

enum class NodeKind {
  Input,      // a graph input tensor
  Constant,   // a scalar broadcast to a shape (attr: scalar)
  Pointwise,  // elementwise op over inputs of the node's own shape
  Reduce,     // reduction of input 0 over `dims`
  View,       // a view of input 0: permute, expand, reshape, slice, select
  Extern,     // an op run by a library kernel; produces extern outputs
  ExternOutput,  // output `index` of an Extern node (a materialized tensor)
};

struct Node {
  int id = -1;
  NodeKind kind = NodeKind::Pointwise;
  std::string op;              // pointwise/reduce/view op name, or extern target
  std::vector<Node*> inputs;
  DType dtype = DType::Float32;
  std::vector<Expr> shape;
  // Layout of inputs and extern outputs (kernel outputs: buffer_strides()).
  std::vector<Expr> strides;
  Expr offset;
  // The strides PyTorch gives this value (FakeTensor metadata).
  std::vector<Expr> meta_strides;

  // Attributes.
  double scalar = 0;           // Constant value; also a pointwise op's parameter
  bool scalar_is_int = false;
  DType compute = DType::Float32;  // dtype the pointwise/reduce op computes in
  std::vector<int64_t> dims;   // Reduce: reduced dims; View permute: order
  bool keepdim = false;
  std::vector<Expr> view_args; // View slice: {dim, start, step}; select: {dim, index}
  int index = -1;              // Input: position; ExternOutput: item
  std::string fx_name;         // the FX node this came from (externs, debugging)
  // Extern: the FX names its arguments refer to, each with the position of
  // its tensor in `inputs` (passes rewrite inputs, so names follow them).
  std::vector<std::pair<std::string, int>> arg_names;
  bool may_alias_inputs = false;  // Extern: its results may be views of its inputs
  // Pointwise identity that writes its value into this graph input, in place
  // (a functionalized `input.copy_(value)`): its buffer is the input's.
  Node* store_into = nullptr;
  // Input or extern output: a CPU tensor (a scalar), which kernels read in
  // place and nothing in the graph writes. Compute node: a value of such
  // scalars only, which each kernel reading it computes once per launch; it
  // never gets a buffer (the FX op runs as an extern when one is needed).
  bool host = false;
  // Eager kernels (an FX node marked "op_result"): this node is an eager
  // call's 16-bit float result, rounded to its dtype where it is computed,
  // as the call's stored result is before the next call reads it -- so a
  // fused chain of eager calls gives what they give one by one (the nodes
  // of one call's decomposition stay in float32, as ATen's kernels compute
  // them). Compiled graphs keep values in float32 between ops, as Inductor.
  bool rounds_to_dtype = false;

  // Filled by analysis.
  std::vector<Node*> users;
  bool graph_output = false;
  bool materialize = false;    // gets its own buffer
  int group = -1;              // kernel group after fusion
  bool dead = false;

  Expr numel() const { return product(shape); }
  // The layout of this node's buffer, when it has one: PyTorch's own
  // (FakeTensor) strides when they are dense, so views of it and tensors
  // saved for backward have the strides AOTAutograd expects; else contiguous.
  std::vector<Expr> buffer_strides() const;
  int rank() const { return static_cast<int>(shape.size()); }
  bool is_store() const { return store_into != nullptr; }
  bool is_compute() const {
    return kind == NodeKind::Pointwise || kind == NodeKind::Reduce || kind == NodeKind::Constant ||
           kind == NodeKind::View;
  }
};

struct GraphOutput {
  // Input: a graph input that is neither a tensor nor a SymInt (an opaque
  // object, e.g. a DTensor's mesh), returned as it came in.
  // Host: a value an extern step returned that is not a neuron tensor (an
  // effect token, a CPU tensor), returned as the wrapper got it (fx_name).
  enum class Kind { None, Tensor, SymInt, Int, Float, Input, Host } kind = Kind::None;
  Node* node = nullptr;
  int input_index = -1;
  Expr expr;
  double number = 0;
  std::string fx_name;
};

class Graph {
 public:
  Node* add(NodeKind kind, const std::string& op);
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::vector<Node*> live_nodes() const;
  std::vector<Node*> inputs;
  std::vector<GraphOutput> outputs;

  void compute_users();
  // Text form, for debug dumps.
  std::string to_string() const;

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
};

const char* kind_name(NodeKind kind);

}  // namespace openneuron::compiler
