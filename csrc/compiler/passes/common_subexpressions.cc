// Common-subexpression elimination: two compute nodes with the same op,
// attributes and inputs are one node, unless an extern writes one of them.
#include <cstdio>
#include <map>
#include <set>

#include "compiler/passes/passes.h"

namespace openneuron::compiler {

static std::string signature(const Node& n) {
  std::string s = std::string(kind_name(n.kind)) + "." + n.op + "|" + dtype_name(n.dtype) + "|" +
                  dtype_name(n.compute) + "|" + join_keys(n.shape) + "|";
  for (Node* in : n.inputs) s += std::to_string(in->id) + ",";
  char buf[48];
  std::snprintf(buf, sizeof buf, "|%.17g|%d|%d|", n.scalar, n.scalar_is_int, n.keepdim);
  s += buf;
  for (int64_t d : n.dims) s += std::to_string(d) + ",";
  s += "|" + join_keys(n.view_args) + (n.rounds_to_dtype ? "|rounded" : "");
  return s;
}

// An extern whose op is an in-place overload ("aten.scatter_.src") writes
// its inputs: two equal values it may write are two buffers.
static bool writes_its_inputs(const Node& n) {
  if (n.kind != NodeKind::Extern) return false;
  const size_t name_end = n.op.rfind('.');
  return name_end != std::string::npos && name_end > 0 && n.op[name_end - 1] == '_';
}

int eliminate_common_subexpressions(Graph& g) {
  std::set<const Node*> written;
  for (auto& n : g.nodes())
    if (!n->dead && writes_its_inputs(*n)) written.insert(n->inputs.begin(), n->inputs.end());
  std::map<std::string, Node*> seen;
  int merged = 0;
  for (auto& n : g.nodes()) {
    if (n->dead || !n->is_compute() || n->is_store()) continue;  // each store writes its own input
    if (written.count(n.get())) continue;
    auto [it, fresh] = seen.emplace(signature(*n), n.get());
    if (fresh) continue;
    replace_uses(g, n.get(), it->second);
    n->dead = true;
    ++merged;
  }
  g.compute_users();
  return merged;
}

}  // namespace openneuron::compiler
