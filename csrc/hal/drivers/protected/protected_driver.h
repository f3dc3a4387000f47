// The `protected` driver (OPENNEURON_DRIVER=protected): the CPU does the
// work, but device memory is closed to the host (protected_memory.h), as a
// discrete GPU's is. Everything above the HAL must move bytes with the
// driver's copies, fills, updates and dispatches; a stray host access
// crashes in the test that makes it. It is CI's stand-in for a GPU.
//
// It is also the smallest example of a driver whose memory the host cannot
// address: the host driver's budget, queues, events and executables are
// reused, and only the memory (map/unmap and the view every queue command
// goes through) and the properties differ. A GPU driver replaces those
// pieces with its own (see README, "Drivers").
#pragma once

#include <memory>

#include "hal/drivers/host/host_driver.h"
#include "hal/drivers/protected/protected_memory.h"

namespace openneuron::hal {

class ProtectedDriver : public HostDriver {
 public:
  ProtectedDriver();
  ProtectedDriver(int device_count, size_t budget);
  ~ProtectedDriver() override;

  std::string name() const override { return "protected"; }
  DeviceProperties properties(int device) const override;
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind) override;
  // Its memory is closed to the host: no kernels to run on it in place.
  const HostKernels* host_kernels() const override { return nullptr; }

 protected:
  void* map_memory(size_t bytes) override;
  void unmap_memory(void* ptr, size_t bytes) override;
  std::unique_ptr<HostQueue> make_queue(int device, int priority) override;

 private:
  std::shared_ptr<ProtectedMemory> memory_ = std::make_shared<ProtectedMemory>();
};

}  // namespace openneuron::hal
