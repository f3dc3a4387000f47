// View simplification: identity views disappear, a reshape of a reshape is
// one reshape, a permute of a permute is one permute.
#include "compiler/passes/passes.h"

namespace openneuron::compiler {

int simplify_views(Graph& g) {
  int changed = 0;
  for (auto& n : g.nodes()) {
    if (n->dead || n->kind != NodeKind::View) continue;
    Node* in = n->inputs[0];
    bool identity_permute = n->op == "permute";
    for (size_t i = 0; i < n->dims.size(); ++i) identity_permute &= n->dims[i] == static_cast<int64_t>(i);
    if ((n->op == "reshape" || n->op == "expand" || identity_permute) && in->shape == n->shape &&
        !n->graph_output) {
      replace_uses(g, n.get(), in);
      n->dead = true;
      ++changed;
      continue;
    }
    if (in->kind != NodeKind::View || in->dead) continue;
    if (n->op == "reshape" && in->op == "reshape") {
      n->inputs[0] = in->inputs[0];
      ++changed;
    } else if (n->op == "permute" && in->op == "permute") {
      std::vector<int64_t> composed;
      for (int64_t d : n->dims) composed.push_back(in->dims[d]);
      n->dims = composed;
      n->inputs[0] = in->inputs[0];
      ++changed;
    }
  }
  g.compute_users();
  if (changed) eliminate_dead_code(g);
  return changed;
}

}  // namespace openneuron::compiler
