// Collectives of one machine's ranks through a ShmChannel, on CPU tensors
// (the host aliases of neuron memory). Large tensors move in chunks of one
// slot; the two slot sets alternate, so one barrier per chunk keeps a rank
// from overwriting data a slower peer still reads.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "torch/distributed/shm_channel.h"

namespace openneuron::integration::shm {

// Whether `op` on `dtype` runs here (otherwise: Gloo). AVG arrives as SUM.
bool supports(c10::ScalarType dtype, c10d::ReduceOp::RedOpType op);

void allreduce(ShmChannel& channel, at::Tensor& tensor,
               c10d::ReduceOp::RedOpType op, std::chrono::milliseconds timeout);
void broadcast(ShmChannel& channel, at::Tensor& tensor, int root,
               std::chrono::milliseconds timeout);
void all_gather_into_tensor(ShmChannel& channel, at::Tensor& output,
                            const at::Tensor& input,
                            std::chrono::milliseconds timeout);
void reduce_scatter_tensor(ShmChannel& channel, at::Tensor& output,
                           const at::Tensor& input,
                           c10d::ReduceOp::RedOpType op,
                           std::chrono::milliseconds timeout);

}  // namespace openneuron::integration::shm
