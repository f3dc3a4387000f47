// The single-op graph of an eager call, in the compiler's FX JSON: every
// tensor a graph input seen through the call's KernelGeometry, sizes and
// strides as symbols (a contiguous innermost stride, or a broadcast one, is
// written as the literal 1 or 0: the kernel's layout class), scalars as
// float symbols, the op's value stored into its output. The text holds no
// size, stride or scalar value, so it is the kernel's cache key: a new shape
// gives the same text and reuses the kernel.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "torch/aten/eager/eager_op.h"
#include "torch/aten/eager/held_call.h"

namespace openneuron::integration {

struct EagerGraph {
  std::string json;                  // the graph, and the key of its kernel
  std::vector<at::Tensor> operands;  // graph inputs, in order (the output first)
  std::vector<int64_t> symbols;      // the symbols' values, in the graph's order
  // A fused graph's operands, each as the held call and argument it was
  // taken from (argument -1: the call's result).
  std::vector<std::pair<int, int>> sources;
};

// The graph of `op` called with `args` (the stack's arguments) writing
// `outs` (its results in order; undefined ones are not written); nullopt (with `why`) when the call has arguments the graph cannot
// express (a CPU tensor that is not a Python number, a generator, a list
// of tensors).
std::optional<EagerGraph> eager_graph(const EagerOp& op, const c10::FunctionSchema& schema,
                                      c10::ArrayRef<c10::IValue> args, const std::vector<at::Tensor>& outs,
                                      std::string* why);

// Calls held for fusion, in order, as one graph over their common shape
// `shape` (pointwise calls' results', reductions' inputs'; reductions all
// over the same dims): a call reading an earlier call's result reads its
// value, not memory; the last value of each result with `store` set is
// written. `cached_row_max`: the longest row whose values the target's
// reduction kernels keep between passes over it (0: none). nullopt (with
// `why`) when a call cannot be written so.
std::optional<EagerGraph> fused_graph(const std::vector<HeldCall>& calls, c10::IntArrayRef shape,
                                      int64_t cached_row_max, std::string* why);

}  // namespace openneuron::integration
