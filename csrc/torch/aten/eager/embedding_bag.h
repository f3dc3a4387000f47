// nn.EmbeddingBag's op (_embedding_bag, _embedding_bag_forward_only) and
// its backward on drivers whose memory the host cannot address, composed of
// device gathers, index_add and scatter_reduce (they took the CPU
// fallback). Results, including the bag bookkeeping the backward reads
// (offset2bag, bag_size, max_indices), and errors are the CPU's; sparse
// gradients and wrong calls are left to the CPU fallback.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_embedding_bag_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration
