#include "torch/runtime/generator.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/ops/empty.h>
#include <c10/core/DispatchKeySet.h>

#include "torch/runtime/device.h"

namespace openneuron::integration {

NeuronGenerator::NeuronGenerator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(kNeuron, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void NeuronGenerator::set_current_seed(uint64_t seed) {
  engine_.set_current_seed(seed);
  philox_offset_ = 0;
}
// The offset is the device draws' (the CPU engine has none).
void NeuronGenerator::set_offset(uint64_t offset) { philox_offset_ = offset; }
uint64_t NeuronGenerator::get_offset() const { return philox_offset_; }
uint64_t NeuronGenerator::current_seed() const {
  return engine_.current_seed();
}
uint64_t NeuronGenerator::seed() {
  philox_offset_ = 0;
  return engine_.seed();
}

std::pair<uint64_t, uint64_t> NeuronGenerator::next_philox_draw() {
  return {engine_.current_seed(), philox_offset_++};
}

// The CPU engine's state, then the device draws' offset (8 bytes).
void NeuronGenerator::set_state(const c10::TensorImpl& new_state) {
  const int64_t engine_bytes = engine_.unsafeGetGeneratorImpl()->get_state()->numel();
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                  (new_state.numel() == engine_bytes || new_state.numel() == engine_bytes + 8),
              "neuron generator state: expected a ByteTensor of ", engine_bytes + 8, " bytes, got ", new_state.numel());
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  at::Tensor engine = at::empty({engine_bytes}, at::kByte);
  std::memcpy(engine.mutable_data_ptr<uint8_t>(), bytes, engine_bytes);
  engine_.unsafeGetGeneratorImpl()->set_state(*engine.unsafeGetTensorImpl());
  uint64_t offset = 0;
  if (new_state.numel() == engine_bytes + 8) std::memcpy(&offset, bytes + engine_bytes, 8);
  philox_offset_ = offset;
}
c10::intrusive_ptr<c10::TensorImpl> NeuronGenerator::get_state() const {
  const at::Tensor engine = at::Tensor(engine_.unsafeGetGeneratorImpl()->get_state());
  at::Tensor state = at::empty({engine.numel() + 8}, engine.options());
  state.narrow(0, 0, engine.numel()).copy_(engine);
  std::memcpy(state.mutable_data_ptr<uint8_t>() + engine.numel(), &philox_offset_, 8);
  return state.getIntrusivePtr();
}
c10::DeviceType NeuronGenerator::device_type() { return kNeuron; }

NeuronGenerator* NeuronGenerator::clone_impl() const {
  auto* copy = new NeuronGenerator(device().index(), 0);
  copy->engine_ = engine_.clone();
  copy->philox_offset_ = philox_offset_;
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
