// Plain value types shared by every driver.
#pragma once

#include <cstddef>
#include <string>

namespace openneuron::hal {

struct DeviceProperties {
  std::string name;           // e.g. "OpenNeuron host device 0"
  std::string driver;         // e.g. "host"
  size_t total_memory = 0;    // bytes the device may hand out (its capacity)
  int compute_units = 0;      // parallel workers a kernel can use
  bool host_addressable = false;  // host code may read/write device memory
  // Kernels run on the thread that launches them, on the host's CPU cores
  // (the host driver): a second host thread driving the device buys no
  // concurrency, only a second thread pool on the same cores.
  bool runs_on_host_threads = false;
  // Kernels may read host (CPU) memory when they run: a CPU scalar operand
  // (an optimizer's step count) is passed to a kernel as a pointer.
  bool kernels_read_host_memory = false;
};

// What bounds a device's allocations (Driver::memory_budget): for
// mem_get_info and out-of-memory messages.
struct MemoryBudget {
  size_t total = 0;  // bytes the device may hold at most (its capacity)
  size_t free = 0;   // bytes allocate() may still obtain now
  bool shared = false;  // every device of the driver draws on this one budget
  // The limit in words, with the setting that changes it: "the 4 host devices
  // share 18.80 GiB (OPENNEURON_HOST_DEVICE_MEMORY)".
  std::string description;
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

const char* to_string(CopyKind kind);

}  // namespace openneuron::hal
