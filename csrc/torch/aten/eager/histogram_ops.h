// histc on drivers whose memory the host cannot address, as device ops (it
// took the CPU fallback: mixture-of-experts layers in transformers count
// tokens per expert with it on every forward). Floating inputs bin as the
// CPU kernel: trunc((x - min) * bins / (max - min)) in the input's dtype
// (histc's linear guess, no search of the edges), the top edge in the last
// bin, values outside [min, max] and NaN dropped; the data's range (read
// back, as the CPU and CUDA do) where min == max. Integer inputs follow
// CUDA's kernel (cuda_dtypes.h), which the CPU lacks.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_histogram_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration
