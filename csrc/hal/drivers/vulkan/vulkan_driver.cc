#include "hal/drivers/vulkan/vulkan_driver.h"

#include <cstdio>
#include <exception>
#include <vector>

#include "hal/drivers/vulkan/vulkan_device.h"
#include "hal/drivers/vulkan/vulkan_event.h"
#include "hal/drivers/vulkan/vulkan_executable.h"
#include "hal/drivers/vulkan/vulkan_memory.h"
#include "hal/drivers/vulkan/vulkan_queue.h"
#include "hal/error.h"

namespace openneuron::hal {

struct VulkanDriver::DeviceState {
  explicit DeviceState(VulkanDevice& device) : memory(device), staging(device), host_imports(device) {}
  VulkanMemory memory;
  StagingPool staging;
  HostImports host_imports;
  std::mutex mutex;
  // Live queues, for synchronize(); weak so queues need not unregister.
  std::vector<std::weak_ptr<VulkanQueueCore>> queues;
  int next_hardware_queue = 0;
  // The queue of the driver's synchronous copies, and its lock.
  std::mutex copy_mutex;
  std::shared_ptr<VulkanQueueCore> copy_queue;
};

VulkanDriver::VulkanDriver() : context_(std::make_unique<VulkanContext>()) {
  for (int d = 0; d < context_->device_count(); ++d)
    devices_.push_back(std::make_unique<DeviceState>(context_->device(d)));
}

VulkanDriver::~VulkanDriver() {
  for (auto& state : devices_) state->copy_queue.reset();
  devices_.clear();  // memory and staging before their devices
  context_.reset();
}

int VulkanDriver::device_count() const { return context_->device_count(); }

void VulkanDriver::check_device(int device) const {
  if (device < 0 || device >= device_count()) throw InvalidDeviceError(device, device_count());
}

DeviceProperties VulkanDriver::properties(int device) const {
  check_device(device);
  return context_->device(device).properties();
}

void* VulkanDriver::allocate(int device, size_t bytes) {
  check_device(device);
  return devices_[device]->memory.allocate(bytes);
}

void VulkanDriver::free(int device, void* ptr, size_t bytes) {
  check_device(device);
  devices_[device]->memory.free(ptr, bytes);
}

size_t VulkanDriver::used_memory(int device) const {
  check_device(device);
  return devices_[device]->memory.used();
}

MemoryBudget VulkanDriver::memory_budget(int device) const {
  check_device(device);
  const DeviceProperties& props = context_->device(device).properties();
  MemoryBudget budget;
  budget.total = props.total_memory;
  // Blocks hold more than the live allocations: their room is the device's.
  budget.free = budget.total - std::min(budget.total, devices_[device]->memory.reserved());
  budget.shared = false;
  budget.description = props.name + " has " + format_bytes(budget.total) + " of device memory";
  return budget;
}

int VulkanDriver::owner(const void* address, size_t bytes) const {
  for (int d = 0; d < device_count(); ++d)
    if (devices_[d]->memory.owns(address)) return d;
  // Let the first device's resolve() word the error.
  devices_[0]->memory.resolve(address, bytes);
  return 0;
}

std::shared_ptr<VulkanQueueCore> VulkanDriver::make_core(int device) {
  DeviceState& state = *devices_[device];
  VulkanDevice& vulkan = context_->device(device);
  std::lock_guard lock(state.mutex);
  auto core = std::make_shared<VulkanQueueCore>(vulkan, state.memory, state.staging, state.host_imports,
                                                state.next_hardware_queue++);
  std::erase_if(state.queues, [](const auto& q) { return q.expired(); });
  state.queues.push_back(core);
  return core;
}

void VulkanDriver::copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  const int src_device = kind == CopyKind::HostToDevice ? -1 : owner(src, bytes);
  const int dst_device = kind == CopyKind::DeviceToHost ? -1 : owner(dst, bytes);
  if (kind == CopyKind::DeviceToDevice && src_device != dst_device) {
    // Two VkDevices share no memory: through the host.
    std::vector<char> bounce(bytes);
    copy(bounce.data(), src, bytes, CopyKind::DeviceToHost);
    copy(dst, bounce.data(), bytes, CopyKind::HostToDevice);
    return;
  }
  DeviceState& state = *devices_[dst_device >= 0 ? dst_device : src_device];
  std::lock_guard lock(state.copy_mutex);
  if (!state.copy_queue) state.copy_queue = make_core(dst_device >= 0 ? dst_device : src_device);
  state.copy_queue->copy_async(dst, src, bytes, kind);
  state.copy_queue->synchronize();
}

std::unique_ptr<Queue> VulkanDriver::create_queue(int device, int priority) {
  check_device(device);
  return std::make_unique<VulkanQueue>(make_core(device), device, priority);
}

std::unique_ptr<Event> VulkanDriver::create_event(int device, bool enable_timing) {
  check_device(device);
  return std::make_unique<VulkanEvent>(device, enable_timing);
}

void VulkanDriver::synchronize(int device) {
  check_device(device);
  std::vector<std::shared_ptr<VulkanQueueCore>> queues;
  {
    std::lock_guard lock(devices_[device]->mutex);
    for (const auto& weak : devices_[device]->queues)
      if (auto queue = weak.lock()) queues.push_back(std::move(queue));
  }
  // Wait for every queue first, then report the first error.
  std::exception_ptr first_error;
  for (const auto& queue : queues) {
    try {
      queue->synchronize();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

std::unique_ptr<Executable> VulkanDriver::load_executable(int device, const std::string& path) {
  check_device(device);
  return std::make_unique<VulkanExecutable>(context_->device(device), device, path);
}

}  // namespace openneuron::hal
