// Eager ops as device kernels made by the compiler, for drivers whose memory
// the host cannot address (the protected driver, GPUs): the op's single-op
// graph (eager_graph.h) is compiled for the device's kernel target once per
// key, cached in memory and in the compiler's persistent kernel cache, and
// launched on the current stream with the call's sizes, strides and scalars
// as arguments. Shapes, dtypes and errors come from the op's own meta
// kernel, run first, so a bad call raises exactly what PyTorch raises.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <string>
#include <vector>

#include "torch/aten/eager/eager_graph.h"
#include "torch/aten/eager/eager_op.h"
#include "torch/aten/op_info.h"

namespace openneuron::integration {

// Runs `op` as a device kernel and returns true, or returns false having
// changed nothing (the op has no kernel: the caller takes the CPU fallback).
bool run_eager_kernel(const c10::OperatorHandle& op, const OpInfo& info, c10::DeviceIndex device,
                      torch::jit::Stack* stack);

// The compiler's options for the device's kernel target `target`: the
// persistent kernel cache as settings.h reads it.
std::string compile_options(const std::string& target);

// dst.copy_(src) between tensors of one device as a device kernel (a cast,
// a broadcast, another layout); false when it cannot (the caller copies
// through the host).
bool copy_as_eager_kernel(at::Tensor& dst, const at::Tensor& src);

// aten::cat as one device copy per input into its slice of the result;
// false (nothing done) when the copies cannot run as kernels.
bool run_cat_as_copies(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack);

// The pieces eager fusion (eager_fusion.h) builds on.
// The call's results as the op's meta function makes them (raises the op's
// error for a bad call).
std::vector<at::Tensor> eager_outputs(const c10::OperatorHandle& op, const EagerOp& e, c10::DeviceIndex device,
                                      c10::ArrayRef<c10::IValue> args);
// Whether a kernel may write `out` while reading the call's arguments.
bool eager_overlap_is_safe(const EagerOp& e, c10::ArrayRef<c10::IValue> args, const at::Tensor& out);
// A call's plan: its kernel and where the kernel's tensors come from,
// cached per op, tensor metadata and scalar values (eager_kernel.cc).
struct CallPlan;
// The call's results (meta function, or the plan's metas for a call seen
// before; raises the op's error for a bad call) and its plan; null when the
// compiler has no kernel for it.
// Without `with_kernel`, the plan has the call's graph checked but no kernel
// built (a held call that runs ATen's kernel on host): never launched.
std::shared_ptr<const CallPlan> plan_call(const c10::OperatorHandle& op, const EagerOp& e, c10::DeviceIndex device,
                                          c10::ArrayRef<c10::IValue> args, std::vector<at::Tensor>* outs,
                                          bool with_kernel = true);
// Launches the planned kernel for these arguments and results.
void launch_call(const CallPlan& plan, c10::ArrayRef<c10::IValue> args, const std::vector<at::Tensor>& outs,
                 c10::DeviceIndex device);

// A call's key: the op, its tensors' dtypes, sizes and strides, its other
// arguments' values (Python numbers' included); false when an argument has
// no key (a list of tensors, a generator). Equal keys give equal graphs.
bool call_key(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, std::string* key);

// A graph's kernels as compiled for a device (opaque; eager_kernel.cc).
struct EagerKernel;
// The graph's kernels on the device (compiled or found on first use,
// recorded under `name`); null when it has none, or more than
// `max_kernels` (0: any number).
std::shared_ptr<const EagerKernel> eager_graph_kernel(const std::string& name, const std::string& json,
                                                      c10::DeviceIndex device, size_t max_kernels = 0);
// Whether this process has compiled the graph already (eager_graph_kernel
// then returns at once).
bool eager_graph_kernel_compiled(const std::string& json);
// Launches them on the current stream over the graph's operands and
// symbols (in the graph's order), counted as a launch of `name`.
void launch_eager_kernel(const EagerKernel& k, const std::string& name, const std::vector<at::Tensor>& operands,
                         const std::vector<int64_t>& symbols, c10::DeviceIndex device);

// Why this thread's last call of `op` without a device kernel had none ("",
// if its last declined call was of another op): what the CPU fallback that
// follows says.
std::string eager_kernel_declined(const std::string& op);

// Counts a run of an op as its decomposition (decomposition_fallback.h).
void record_decomposition(const std::string& op);

struct EagerKernelRecord {
  std::string op;
  int64_t launches = 0;
  int64_t kernels = 0;  // distinct kernels (keys) of this op
  int64_t builds = 0;   // of which were built, not found in the persistent cache
  std::string declined;  // why the last call without a kernel had none (it fell back)
};
// Ops that ran as eager device kernels (or were declined) since the last reset.
std::vector<EagerKernelRecord> eager_kernel_report();
void reset_eager_kernel_report();

}  // namespace openneuron::integration
