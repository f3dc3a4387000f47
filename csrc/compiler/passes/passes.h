// Graph-level passes over the IR. Each returns how many nodes it changed so
// the debug dump can report it.
#pragma once

#include "compiler/ir/graph.h"

namespace openneuron::compiler {

// Redirects every use of `old` (node inputs and graph outputs) to `now`.
void replace_uses(Graph& g, Node* old, Node* now);

int eliminate_dead_code(Graph& g);
int eliminate_common_subexpressions(Graph& g);
int fold_constants(Graph& g);
int simplify_views(Graph& g);

}  // namespace openneuron::compiler
