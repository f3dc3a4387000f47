// The `vulkan` driver (OPENNEURON_DRIVER=vulkan): one neuron device per
// qualifying Vulkan physical device (OPENNEURON_VULKAN_DEVICES picks and
// orders them), any vendor, Mesa's lavapipe in CI. Device memory is
// closed to the host (vulkan_memory.h); kernels are SPIR-V executables
// (spirv_executable_file.h) made by the compiler's GLSL target; queues
// batch commands and order them with timeline semaphores (vulkan_queue.h).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hal/driver.h"

namespace openneuron::hal {

class VulkanContext;
class VulkanMemory;
class StagingPool;
class VulkanQueueCore;

class VulkanDriver : public Driver {
 public:
  // Throws Error saying why when there is no Vulkan loader or usable device.
  VulkanDriver();
  ~VulkanDriver() override;

  std::string name() const override { return "vulkan"; }
  int device_count() const override;
  DeviceProperties properties(int device) const override;

  void* allocate(int device, size_t bytes) override;
  void free(int device, void* ptr, size_t bytes) override;
  size_t used_memory(int device) const override;
  MemoryBudget memory_budget(int device) const override;

  void copy(void* dst, const void* src, size_t bytes, CopyKind kind) override;

  std::unique_ptr<Queue> create_queue(int device, int priority) override;
  std::unique_ptr<Event> create_event(int device, bool enable_timing) override;
  void synchronize(int device) override;
  std::unique_ptr<Executable> load_executable(int device, const std::string& path) override;

 private:
  struct DeviceState;
  void check_device(int device) const;
  // The device whose memory holds `address`; throws InvalidArgumentError.
  int owner(const void* address, size_t bytes) const;
  std::shared_ptr<VulkanQueueCore> make_core(int device);

  std::unique_ptr<VulkanContext> context_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
};

}  // namespace openneuron::hal
