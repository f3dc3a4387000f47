#include "compiler/ir/graph.h"

#include <algorithm>
#include <cstdio>

namespace openneuron::compiler {

const char* kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::Input: return "input";
    case NodeKind::Constant: return "constant";
    case NodeKind::Pointwise: return "pointwise";
    case NodeKind::Reduce: return "reduce";
    case NodeKind::View: return "view";
    case NodeKind::Extern: return "extern";
    case NodeKind::ExternOutput: return "extern_output";
  }
  return "?";
}

// Dense: a permutation of a contiguous layout (every element once, no gaps).
static bool is_dense(const std::vector<Expr>& shape, const std::vector<Expr>& strides) {
  std::vector<bool> used(shape.size(), false);
  size_t left = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    used[i] = shape[i].equals(1);
    left += !used[i];
  }
  Expr expected(1);
  while (left > 0) {
    size_t i = 0;
    while (i < shape.size() && (used[i] || strides[i] != expected)) ++i;
    if (i == shape.size()) return false;
    used[i] = true;
    --left;
    expected = expected * shape[i];
  }
  return true;
}

std::vector<Expr> Node::buffer_strides() const {
  if (kind == NodeKind::Input || kind == NodeKind::ExternOutput) return strides;
  if (store_into) return store_into->strides;
  if (meta_strides.size() != shape.size()) return contiguous_strides(shape);
  if (is_dense(shape, meta_strides)) return meta_strides;
  // Not dense (a permuted view into a wider buffer): dense strides in the
  // same dim order, as eager's empty_like keeps it, so kernels that choose
  // their output layout from an input's (CPU flash attention) see what the
  // trace saw.
  for (const Expr& st : meta_strides)
    if (!st.is_const()) return contiguous_strides(shape);
  std::vector<size_t> order(shape.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return meta_strides[a].value() > meta_strides[b].value(); });
  std::vector<Expr> out(shape.size(), Expr(1));
  Expr stride(1);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    out[*it] = stride;
    stride = stride * shape[*it];
  }
  return out;
}

Node* Graph::add(NodeKind kind, const std::string& op) {
  auto node = std::make_unique<Node>();
  node->id = static_cast<int>(nodes_.size());
  node->kind = kind;
  node->op = op;
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

std::vector<Node*> Graph::live_nodes() const {
  std::vector<Node*> out;
  for (auto& n : nodes_)
    if (!n->dead) out.push_back(n.get());
  return out;
}

void Graph::compute_users() {
  for (auto& n : nodes_) {
    n->users.clear();
    n->graph_output = false;
  }
  for (auto& n : nodes_) {
    if (n->dead) continue;
    for (Node* in : n->inputs) {
      bool seen = false;
      for (Node* u : in->users) seen |= u == n.get();
      if (!seen) in->users.push_back(n.get());
    }
  }
  for (auto& o : outputs)
    if (o.node) o.node->graph_output = true;
}

std::string Graph::to_string() const {
  std::string out;
  for (auto& n : nodes_) {
    if (n->dead) continue;
    out += "%" + std::to_string(n->id) + " = " + kind_name(n->kind) + "." + n->op + "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      if (i) out += ", ";
      out += "%" + std::to_string(n->inputs[i]->id);
    }
    out += ") : ";
    out += dtype_name(n->dtype);
    out += join_keys(n->shape);
    if (n->kind == NodeKind::Input || n->kind == NodeKind::ExternOutput)
      out += " strides=" + join_keys(n->strides) + " offset=" + n->offset.key();
    if (n->kind == NodeKind::Constant || (n->kind == NodeKind::Pointwise && n->inputs.empty())) {
      char buf[40];
      std::snprintf(buf, sizeof buf, " value=%.17g", n->scalar);
      out += buf;
    }
    if (n->kind == NodeKind::Pointwise || n->kind == NodeKind::Reduce)
      out += std::string(" compute=") + dtype_name(n->compute);
    if (!n->dims.empty()) {
      out += " dims=[";
      for (size_t i = 0; i < n->dims.size(); ++i) out += (i ? "," : "") + std::to_string(n->dims[i]);
      out += "]";
    }
    if (n->keepdim) out += " keepdim";
    if (!n->view_args.empty()) out += " args=" + join_keys(n->view_args);
    if (n->index >= 0) out += " index=" + std::to_string(n->index);
    if (n->kind == NodeKind::Extern) out += " fx=" + n->fx_name;
    if (n->store_into) out += " into=%" + std::to_string(n->store_into->id);
    out += "\n";
  }
  out += "return (";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i) out += ", ";
    auto& o = outputs[i];
    if (o.node) out += "%" + std::to_string(o.node->id);
    else if (o.kind == GraphOutput::Kind::SymInt) out += o.expr.key();
    else if (o.kind == GraphOutput::Kind::Input) out += "input" + std::to_string(o.input_index);
    else if (o.kind == GraphOutput::Kind::Int || o.kind == GraphOutput::Kind::Float) out += std::to_string(o.number);
    else out += "None";
  }
  return out + ")\n";
}

}  // namespace openneuron::compiler
