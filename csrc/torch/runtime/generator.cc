#include "torch/runtime/generator.h"

#include <memory>
#include <mutex>
#include <vector>

#include <c10/core/DispatchKeySet.h>

#include "torch/runtime/device.h"

namespace openneuron::integration {

NeuronGenerator::NeuronGenerator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(kNeuron, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void NeuronGenerator::set_current_seed(uint64_t seed) {
  engine_.set_current_seed(seed);
}
void NeuronGenerator::set_offset(uint64_t offset) { engine_.set_offset(offset); }
uint64_t NeuronGenerator::get_offset() const { return engine_.get_offset(); }
uint64_t NeuronGenerator::current_seed() const {
  return engine_.current_seed();
}
uint64_t NeuronGenerator::seed() { return engine_.seed(); }
void NeuronGenerator::set_state(const c10::TensorImpl& new_state) {
  engine_.unsafeGetGeneratorImpl()->set_state(new_state);
}
c10::intrusive_ptr<c10::TensorImpl> NeuronGenerator::get_state() const {
  return engine_.unsafeGetGeneratorImpl()->get_state();
}
c10::DeviceType NeuronGenerator::device_type() { return kNeuron; }

NeuronGenerator* NeuronGenerator::clone_impl() const {
  auto* copy = new NeuronGenerator(device().index(), 0);
  copy->engine_ = engine_.clone();
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static auto* generators = [] {
    auto* v = new std::vector<at::Generator>();
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      v->push_back(at::make_generator<NeuronGenerator>(
          d, c10::default_rng_seed_val));
    }
    return v;
  }();
  return (*generators)[resolve_device_index(device)];
}

at::Generator new_generator(c10::DeviceIndex device) {
  return at::make_generator<NeuronGenerator>(
      resolve_device_index(device), c10::default_rng_seed_val);
}

}  // namespace openneuron::integration
