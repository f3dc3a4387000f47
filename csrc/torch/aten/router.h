// Op routing (see router.cc).
#pragma once

namespace openneuron::integration {

// Registers the router as the neuron kernel of every op that has a CPU
// kernel but would otherwise take a generic composite kernel, so neuron runs
// the same kernel as CPU, in one dispatch. Called when openneuron._C loads.
void route_ops_with_cpu_kernels_directly();

}  // namespace openneuron::integration
