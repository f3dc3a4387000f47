// Op routing (see router.cc).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs any ATen op on neuron tensors: the host kernel on CPU views, or the
// CPU-fallback path with copies. The neuron fallback kernel of every op.
void route_boxed(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                 torch::jit::Stack* stack);

// Runs `op` (its arguments on `stack`) through its CPU kernel on CPU views
// of the neuron tensors, once the current stream's work is done.
void run_on_host(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack);

// The CPU dispatch key whose kernels an op's CPU arguments (views or
// copies) run: quantized and sparse tensors run PyTorch's QuantizedCPU and
// SparseCPU / SparseCsrCPU kernels, everything else CPU's.
c10::DispatchKey cpu_key_for(c10::ArrayRef<c10::IValue> args);

// True when the driver's memory is host-addressable (the host driver).
bool host_addressable();

// Inside a catch block: rethrows a CPU kernel's error with the op's name and
// device added (a missing kernel becomes NotImplementedError saying so).
[[noreturn]] void rethrow_with_op_context(const c10::OperatorHandle& op,
                                          c10::DeviceIndex device);

// Registers the router as the neuron kernel of every op that has a CPU
// kernel but would otherwise take a generic composite kernel, so neuron runs
// the same kernel as CPU, in one dispatch. Called when openneuron._C loads.
void route_ops_with_cpu_kernels_directly();

}  // namespace openneuron::integration
