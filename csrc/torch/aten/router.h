// Op routing (see router.cc).
#pragma once

namespace openneuron::integration {

// Registers the router as the neuron kernel of structured ops, so they reach
// the CPU kernel in one dispatch. Called once when openneuron._C loads.
void route_structured_ops_directly();

}  // namespace openneuron::integration
