// The `host` driver: the devices share this machine's RAM, bounded by one
// budget for all of them (accounting), and the CPU does the work. It lets the whole stack run and be
// tested on any machine.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "hal/driver.h"

namespace openneuron::hal {

class HostQueue;
class HostQueueCore;

class HostDriver : public Driver {
 public:
  // Devices and budget from config().
  HostDriver();
  // Explicit sizes, for tests: `budget` bytes shared by all devices.
  HostDriver(int device_count, size_t budget);
  ~HostDriver() override;

  std::string name() const override { return "host"; }
  int device_count() const override { return device_count_; }
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
  const HostKernels* host_kernels() const override;

 protected:
  // What a CPU driver built on this one changes (the protected driver):
  // how memory is mapped and queues reach it. map_memory returns nullptr
  // when the OS has no room.
  virtual void* map_memory(size_t bytes);
  virtual void unmap_memory(void* ptr, size_t bytes);
  virtual std::unique_ptr<HostQueue> make_queue(int device, int priority);
  // Frees every allocation still held; a derived driver's destructor calls
  // it, while its unmap_memory still exists.
  void release_all();
  // The budget in words, for memory_budget() and OOM messages.
  std::string budget_description() const;

 private:
  struct DeviceState {
    std::mutex mutex;
    size_t used = 0;
    std::unordered_map<void*, size_t> allocations;  // bytes by address
    // Live queues, for synchronize(); weak so queues need not unregister.
    std::vector<std::weak_ptr<HostQueueCore>> queues;
  };

  void check_device(int device) const;

  int device_count_;
  // One budget for every device: they all take the same RAM, so per-device
  // budgets would let the devices together commit more than the machine has.
  const size_t budget_;
  std::atomic<size_t> budget_used_{0};
  std::vector<std::unique_ptr<DeviceState>> devices_;
};

}  // namespace openneuron::hal
