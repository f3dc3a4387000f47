// Adaptive Eager Execution: pointwise eager calls on the same stream and
// over the same shape are held back, and run as one kernel the compiler
// fuses when the chain is flushed; a reduction of a held result over that
// shape ends the chain, in the same kernel. A call's results, dtypes and errors come
// from its meta function at the call, so nothing but the timing of the
// computation changes; anything that could observe the held results (an op
// that is not held, a copy, a stream or event operation, a synchronize)
// flushes first. Results nobody holds when the chain runs are not written
// to memory. OPENNEURON_EAGER_FUSION=0 (or torch.neuron.set_eager_fusion)
// turns it off: every op then runs alone, bitwise as without fusion.
// It is on by default on every driver. On host, whose eager ops are ATen's
// CPU kernels, calls under kMinHeldElementsOnCpp keep the direct route, a
// held call that did not fuse runs ATen's kernel (bitwise as unfused), and
// a chain whose kernel is not built yet runs so: its kernel builds in the
// background once the chain repeats (background_builds.h). Fused chains
// run 2-6x faster, each held call that ends alone costs 1-10 us, and the
// benchmark's models measure within their noise (~4 %) of fusion off.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <string>
#include <vector>

#include "torch/aten/op_info.h"

namespace openneuron::integration {

// Calls over fewer elements are not held where kernels are the compiler's
// C++ (host, protected): a cached kernel launches there in ~3 us, a held
// call costs ~0.3 us more on protected (its bookkeeping, the chain's flush;
// 1.3-1.9 us more than ATen's direct route on host), and below
// ~8K elements fusion saves less than that in memory traffic (a chain of 5
// ops: 17.5 us fused, 16.0 us unfused at 8K elements; 30 vs 64 at 128K). A
// GPU's dispatches cost more: on one, tiny chains are held and fused too.
constexpr int64_t kMinHeldElementsOnCpp = 8192;

// Holds the call for fusion and returns true (its results on the stack), or
// returns false having changed nothing but, maybe, flushed held calls.
bool hold_for_fusion(const c10::OperatorHandle& op, const OpInfo& info, c10::DeviceIndex device,
                     torch::jit::Stack* stack);

// dst.copy_(src) on one device, held as a call of aten::copy_; false
// (nothing done but, maybe, a flush) when it cannot be.
bool hold_copy_for_fusion(at::Tensor& dst, const at::Tensor& src);

// Runs the calls held on `device` (-1: on every device) now. Cheap when
// nothing is held.
void flush_held_calls(c10::DeviceIndex device = -1);

bool eager_fusion_enabled();
void set_eager_fusion(bool enabled);  // flushes first

struct EagerFusionStats {
  int64_t held = 0;           // calls held
  int64_t chains = 0;         // flushes that ran calls
  int64_t fused_kernels = 0;  // chains of two or more calls run as one kernel
  int64_t fused_calls = 0;    // calls in those
  int64_t unfused = 0;        // chains of two or more that ran call by call (fusion declined)
  int64_t dead_results = 0;   // results never written (nobody held them)
  int64_t awaiting_build = 0;  // chains run call by call while their kernel built (background_builds.h)
};
EagerFusionStats eager_fusion_stats();
void reset_eager_fusion_stats();

}  // namespace openneuron::integration
