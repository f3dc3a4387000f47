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

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

const char* to_string(CopyKind kind);

}  // namespace openneuron::hal
