// A held call that did not fuse, on host-addressable memory (the host
// driver): ATen's CPU kernel runs it, as it would have run without eager
// fusion, so an op fusion did not change gives the same bits as with fusion
// off, at ATen's speed (its softmax and GELU beat a single-op compiled
// kernel on a CPU).
#pragma once

#include <c10/core/Device.h>

#include "torch/aten/eager/held_call.h"

namespace openneuron::integration {

// Runs `call` through ATen's CPU kernel on CPU views: an in-place call on its
// self, a functional one through its out= overload into the result the
// caller already holds. False (nothing done) when the op has no such
// overload: the caller launches the call's own kernel.
bool run_held_call_on_host(const HeldCall& call, c10::DeviceIndex device);

// Whether held calls of `schema` run that way (their own compiled kernel
// is then never needed).
bool runs_held_calls_on_host(const c10::FunctionSchema& schema, const EagerOp& e);

}  // namespace openneuron::integration
