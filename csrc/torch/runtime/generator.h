// The neuron random number generator. Host kernels are ATen's CPU kernels,
// which demand a CPU generator; each neuron generator therefore owns a CPU
// generator engine, while presenting itself (device, seed, state) as neuron.
// One default generator per device, seeded by torch.manual_seed.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <utility>

namespace openneuron::integration {

class NeuronGenerator final : public c10::GeneratorImpl {
 public:
  NeuronGenerator(c10::DeviceIndex device, uint64_t seed);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  // The CPU engine that host kernels draw from.
  const at::Generator& engine() const { return engine_; }
  // Device kernels draw Philox numbers (cpp_library_random.cc) at (seed,
  // offset): a call takes the current offset and advances it by one, so
  // every call draws new numbers and a seed replays them. The offset is
  // part of the state (get_state), as on CUDA, so fork_rng and activation
  // checkpointing replay device draws too. Caller holds mutex_.
  std::pair<uint64_t, uint64_t> next_philox_draw();
  static c10::DeviceType device_type();

 private:
  NeuronGenerator* clone_impl() const override;
  at::Generator engine_;
  uint64_t philox_offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

}  // namespace openneuron::integration
