#include "compiler/codegen/reduction_stores.h"

#include <algorithm>
#include <set>

namespace openneuron::compiler {
bool loaded(const KernelGroup& g, const Node* n) {
  const bool materialized = n->kind == NodeKind::Input || n->kind == NodeKind::ExternOutput || n->materialize;
  return materialized && std::find(g.roots.begin(), g.roots.end(), n) == g.roots.end();
}

namespace {

// Whether `n`'s value reads a reduction computed in the group.
bool needs_a_reduction(const KernelGroup& g, const Node* n) {
  std::vector<const Node*> work(n->inputs.begin(), n->inputs.end());
  std::set<int> seen;
  while (!work.empty()) {
    const Node* x = work.back();
    work.pop_back();
    if (!seen.insert(x->id).second) continue;
    if (x->kind == NodeKind::Reduce) return true;
    if (loaded(g, x)) continue;
    for (const Node* in : x->inputs) work.push_back(in);
  }
  return false;
}

// Whether any value of the group reads `input`.
bool group_reads(const KernelGroup& g, const Node* input) {
  std::vector<const Node*> work(g.roots.begin(), g.roots.end());
  std::set<int> seen;
  while (!work.empty()) {
    const Node* x = work.back();
    work.pop_back();
    if (!seen.insert(x->id).second) continue;
    for (const Node* in : x->inputs) {
      if (in == input) return true;
      if (!loaded(g, in)) work.push_back(in);
    }
  }
  return false;
}

}  // namespace

bool stores_over_a_read(const KernelGroup& g, const Node* root) {
  return root->kind != NodeKind::Reduce && root->is_store() && group_reads(g, root->store_into);
}

std::vector<Node*> stores_for_the_first_pass(const KernelGroup& g) {
  std::vector<Node*> folded;
  if (std::none_of(g.roots.begin(), g.roots.end(), [](const Node* r) { return r->kind == NodeKind::Reduce; }))
    return folded;
  for (Node* r : g.roots)
    if (r->kind != NodeKind::Reduce && r->shape == g.shape && r->is_store() && !r->host &&
        !needs_a_reduction(g, r) && !group_reads(g, r->store_into))
      folded.push_back(r);
  return folded;
}

}  // namespace openneuron::compiler
