// Constant folding: pointwise ops over constants become constants, views of
// constants are constants of the view's shape, and x*1, x+0, x-0, x/1 (in
// the same dtype) are x.
#include <cmath>

#include "compiler/passes/passes.h"

namespace openneuron::compiler {

namespace {

bool is_scalar_constant(const Node* n) { return n->kind == NodeKind::Constant && n->view_args.empty(); }

bool fold_value(const std::string& op, const std::vector<double>& v, double& out) {
  if (op == "identity") out = v[0];
  else if (op == "neg") out = -v[0];
  else if (op == "add") out = v[0] + v[1];
  else if (op == "sub") out = v[0] - v[1];
  else if (op == "mul") out = v[0] * v[1];
  else if (op == "div") out = v[0] / v[1];
  else if (op == "sqrt") out = std::sqrt(v[0]);
  else if (op == "exp") out = std::exp(v[0]);
  else if (op == "log") out = std::log(v[0]);
  else return false;
  return true;
}

bool is_value(const Node* n, double v) { return is_scalar_constant(n) && n->scalar == v; }

}  // namespace

int fold_constants(Graph& g) {
  int folded = 0;
  for (auto& n : g.nodes()) {
    if (n->dead) continue;
    if (n->kind == NodeKind::View && is_scalar_constant(n->inputs[0])) {
      // A view of a constant is the constant in the view's shape.
      n->kind = NodeKind::Constant;
      n->scalar = n->inputs[0]->scalar;
      n->scalar_is_int = n->inputs[0]->scalar_is_int;
      n->compute = n->inputs[0]->compute;
      n->op = "constant";
      n->inputs.clear();
      n->view_args.clear();
      n->dims.clear();
      ++folded;
      continue;
    }
    if (n->kind != NodeKind::Pointwise || n->is_store()) continue;  // a store stays a write
    bool all_const = !n->inputs.empty();
    std::vector<double> values;
    for (Node* in : n->inputs) {
      all_const &= is_scalar_constant(in) && is_floating(n->compute);
      values.push_back(in->scalar);
    }
    double out;
    if (all_const && fold_value(n->op, values, out)) {
      n->kind = NodeKind::Constant;
      n->op = "constant";
      n->scalar = out;
      n->scalar_is_int = false;
      n->inputs.clear();
      ++folded;
      continue;
    }
    // Algebraic identities that keep dtype and shape.
    if (n->inputs.size() == 2 && n->inputs[0]->dtype == n->dtype && n->inputs[0]->shape == n->shape &&
        n->inputs[0]->kind != NodeKind::Constant) {
      Node* b = n->inputs[1];
      bool identity = ((n->op == "mul" || n->op == "div") && is_value(b, 1)) ||
                      ((n->op == "add" || n->op == "sub") && is_value(b, 0));
      if (identity && !n->graph_output) {
        replace_uses(g, n.get(), n->inputs[0]);
        n->dead = true;
        ++folded;
      }
    }
  }
  g.compute_users();
  return folded;
}

}  // namespace openneuron::compiler
