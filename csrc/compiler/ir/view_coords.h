// Where a view's element comes from: the coordinates in its input of the
// element at coordinates `c` of the view. Target-neutral IR semantics, used
// by code generation and by the scheduler's fusion legality.
#pragma once

#include <vector>

#include "compiler/ir/expr.h"
#include "compiler/ir/graph.h"

namespace openneuron::compiler {

// For expand, permute, slice, select and reshape views; throws CompileError
// for views that are not a coordinate map (as_strided reads memory, pad
// chooses between its input and a fill value) and unknown views.
std::vector<Expr> view_input_coords(const Node* view, const std::vector<Expr>& c);

// A reshape from `in_shape` to `out_shape`: dims grouped as PyTorch's view
// groups them, a flat index only within a group.
std::vector<Expr> reshape_coords(const std::vector<Expr>& in_shape, const std::vector<Expr>& out_shape,
                                 const std::vector<Expr>& c);

}  // namespace openneuron::compiler
