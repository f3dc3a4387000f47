// PrivateUse1 hooks: how PyTorch reaches the neuron device's generators,
// pinned memory, device count and lazy initialisation.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>
#include "hal/queue.h"

#include "torch/runtime/device.h"
#include "torch/runtime/device_allocator.h"
#include "torch/runtime/generator.h"
#include "torch/runtime/pinned_allocator.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {
namespace {

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device) const override {
    return is_initialized();
  }
  void init() const override { lazy_init(); }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_current_device(device);
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const auto old = current_device();
    set_current_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  const at::Generator& getDefaultGenerator(
      c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device);
  }
  c10::Device getDeviceFromPtr(void* /*data*/) const override {
    return c10::Device(kNeuron, current_device());
  }
  bool isPinnedPtr(const void* data) const override {
    return is_pinned_ptr(data);
  }
  c10::Allocator* getPinnedMemoryAllocator() const override {
    return pinned_allocator();
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage,
                              size_t newsize) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(),
                "Trying to resize storage that is not resizable");
    // On the storage's own device, whichever device is current.
    c10::DataPtr data = newsize ? allocate_device_memory(newsize, storage.device().index(),
                                                         storage.device())
                                : c10::DataPtr(nullptr, storage.device());
    const size_t keep = std::min(newsize, impl->nbytes());
    flush_held_work(storage.device().index());  // held kernels write the old block
    // Queued in stream order, as a kernel would be; the old block is reused
    // only by later work on this stream.
    if (keep)
      current_queue(storage.device().index())
          .copy_async(data.get(), impl->data(), keep, hal::CopyKind::DeviceToDevice);
    impl->set_data_ptr_noswap(std::move(data));
    impl->set_nbytes(newsize);
  }
};

struct RegisterHooks {
  RegisterHooks() {
    static Hooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  }
} register_hooks;

}  // namespace
}  // namespace openneuron::integration
