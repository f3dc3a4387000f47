// Dead-code elimination: compute nodes whose values reach no output and no
// extern kernel are dropped. Extern nodes and stores into graph inputs always
// stay: they are the graph's in-place updates (functionalized mutations end
// in copy_ ops with no users).
#include "compiler/passes/passes.h"

namespace openneuron::compiler {

void replace_uses(Graph& g, Node* old, Node* now) {
  for (auto& n : g.nodes())
    for (auto& in : n->inputs)
      if (in == old) in = now;
  for (auto& o : g.outputs)
    if (o.node == old) o.node = now;
}

int eliminate_dead_code(Graph& g) {
  std::vector<bool> live(g.nodes().size(), false);
  std::vector<Node*> work;
  for (auto& o : g.outputs)
    if (o.node) work.push_back(o.node);
  for (auto& n : g.nodes())
    if (!n->dead && (n->kind == NodeKind::Extern || n->kind == NodeKind::Input || n->is_store())) work.push_back(n.get());
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    if (live[n->id]) continue;
    live[n->id] = true;
    for (Node* in : n->inputs) work.push_back(in);
  }
  // Extern outputs live with their extern.
  for (auto& n : g.nodes())
    if (n->kind == NodeKind::ExternOutput && live[n->inputs[0]->id]) live[n->id] = true;
  int removed = 0;
  for (auto& n : g.nodes()) {
    if (!n->dead && !live[n->id]) {
      n->dead = true;
      ++removed;
    }
  }
  g.compute_users();
  return removed;
}

}  // namespace openneuron::compiler
