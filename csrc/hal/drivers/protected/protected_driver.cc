#include "hal/drivers/protected/protected_driver.h"

#include "hal/config.h"
#include "hal/drivers/host/host_queue.h"

namespace openneuron::hal {

ProtectedDriver::ProtectedDriver()
    : HostDriver(config().host_device_count, config().host_device_memory) {}

ProtectedDriver::ProtectedDriver(int device_count, size_t budget)
    : HostDriver(device_count, budget) {}

ProtectedDriver::~ProtectedDriver() { release_all(); }

DeviceProperties ProtectedDriver::properties(int device) const {
  DeviceProperties props = HostDriver::properties(device);
  props.name = "OpenNeuron protected device " + std::to_string(device);
  props.driver = "protected";
  // Like a discrete GPU: memory only the driver touches, kernels that run
  // asynchronously on the queue and cannot read host memory.
  props.host_addressable = false;
  props.unified_memory = false;
  props.runs_on_host_threads = false;
  props.kernels_read_host_memory = false;
  return props;
}

void ProtectedDriver::copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  host_copy(memory_.get(), dst, src, bytes, kind);
}

void* ProtectedDriver::map_memory(size_t bytes) { return memory_->map(bytes); }

void ProtectedDriver::unmap_memory(void* ptr, size_t bytes) { memory_->unmap(ptr, bytes); }

std::unique_ptr<HostQueue> ProtectedDriver::make_queue(int device, int priority) {
  return std::make_unique<HostQueue>(device, priority, memory_, /*dispatch_on_worker=*/true);
}

}  // namespace openneuron::hal
