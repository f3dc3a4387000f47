// The DeviceGuardImpl of the neuron device: PyTorch's generic handle on
// devices, streams and events (torch.Stream, torch.Event, torch.accelerator).
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "hal/driver.h"
#include "hal/error.h"
#include "hal/event.h"
#include "torch/runtime/device.h"
#include "torch/runtime/device_allocator.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {
namespace {

hal::Event* as_event(void* event) { return static_cast<hal::Event*>(event); }

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kNeuron);
    const auto old = current_device();
    if (d.index() != old) set_current_device(d.index());
    return c10::Device(kNeuron, old);
  }
  c10::Device getDevice() const override {
    return c10::Device(kNeuron, current_device());
  }
  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kNeuron);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_current_device(d.index());
    } catch (...) {
    }
  }

  c10::Stream getStream(c10::Device d) const override {
    return current_stream(d.index());
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return default_stream(resolve_device_index(d.index()));
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return stream_from_pool(d.index(), priority);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d,
                                      bool is_high_priority) const override {
    return stream_from_pool(d.index(), is_high_priority ? -1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return exchange_stream(s);
  }
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    resolve_device_index(d.index());
    return c10::DeviceCapability();  // host kernels support every dtype
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  void record(void** event, const c10::Stream& stream,
              const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", int(device_index),
                " does not match recording stream's device index ",
                int(stream.device_index()), ".");
    if (*event == nullptr) {
      *event = hal::driver()
                   .create_event(stream.device_index(),
                                 flag == c10::EventFlag::BACKEND_DEFAULT)
                   .release();
    }
    flush_held_work(stream.device_index());
    queue_for(stream).record(*as_event(*event));
  }
  void block(void* event, const c10::Stream& stream) const override {
    flush_held_work(stream.device_index());
    if (event) queue_for(stream).wait(*as_event(event));
  }
  bool queryEvent(void* event) const override {
    return event == nullptr || as_event(event)->query();
  }
  void synchronizeEvent(void* event) const override {
    if (event) as_event(event)->synchronize();
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete as_event(event);
  }
  double elapsedTime(void* start, void* end,
                     const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end,
                "Both events must be recorded before calculating elapsed "
                "time.");
    try {
      return as_event(start)->elapsed_ms(*as_event(end));
    } catch (const hal::Error& e) {
      TORCH_CHECK_VALUE(false, e.what());
    }
  }

  bool queryStream(const c10::Stream& stream) const override {
    flush_held_work(stream.device_index());
    return queue_for(stream).query();
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    flush_held_work(stream.device_index());
    queue_for(stream).synchronize();
  }
  void synchronizeDevice(const c10::DeviceIndex device) const override {
    flush_held_work(resolve_device_index(device));
    hal::driver().synchronize(resolve_device_index(device));
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                             const c10::Stream& stream) const override {
    device_allocator().recordStream(data_ptr, stream);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

}  // namespace
}  // namespace openneuron::integration
