// Which stores of a reduction kernel group the first reduction pass over a
// row can write, and which values a group loads: shared by the C++ and GLSL
// kernel writers.
#pragma once

#include <vector>

#include "compiler/passes/schedule.h"

namespace openneuron::compiler {

// Whether the group loads `n` rather than computes it (a graph input, an
// extern's output, or another group's buffer).
bool loaded(const KernelGroup& g, const Node* n);

// Full-size stores (the group's shape) that need no reduction's result and
// go where the group reads nothing (a chain's value kept beside its sum:
// softmax's exp). The first reduction pass writes them from the values it
// computes anyway; an epilogue pass of their own would compute them again
// (and read their inputs again). Empty when the group has no reduction.
std::vector<Node*> stores_for_the_first_pass(const KernelGroup& g);

// Stores over memory the group reads (an in-place op: x.mul_(2) before a
// reduction of x): written after every pass over the row, as each pass
// reads the buffer's old values (the graph's values are computed from
// them); written before a later pass, it would read the new ones.
bool stores_over_a_read(const KernelGroup& g, const Node* root);

}  // namespace openneuron::compiler
