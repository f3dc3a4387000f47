// A compiled program loaded on a device: a set of named entry points
// (kernels) that run in order on a queue. The host driver's executables are
// shared objects made by the compiler; a GPU driver's would be its binaries.
#pragma once

#include <cstdint>
#include <string>

namespace openneuron::hal {

class Queue;

// Entry point ABI: void entry(void** buffers, const int64_t* scalars,
// int64_t threads). Buffers are device pointers; scalars are symbolic sizes.
class Executable {
 public:
  virtual ~Executable() = default;
  // Index of the entry point `name`; throws Error when missing.
  virtual int entry(const std::string& name) = 0;
  // Runs entry `index` after everything enqueued on `queue` before it.
  virtual void launch(Queue& queue, int index, void** buffers, const int64_t* scalars, int64_t threads) = 0;
};

}  // namespace openneuron::hal
