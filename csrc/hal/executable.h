// A compiled program loaded on a device: a set of named entry points
// (kernels), run by Queue::dispatch. The host and protected drivers'
// executables are shared objects made by the compiler; a GPU driver's are
// its binaries (SPIR-V for Vulkan).
#pragma once

#include <string>

#include "hal/types.h"

namespace openneuron::hal {

class Executable {
 public:
  virtual ~Executable() = default;
  // Index of the entry point `name`; throws Error naming the executable and
  // the entry when it has none.
  virtual int entry(const std::string& name) = 0;
  // What entry `index` (from entry()) takes; throws InvalidArgumentError for
  // an index entry() never returned.
  virtual const EntryInfo& entry_info(int index) const = 0;
};

// Checks a dispatch of entry `info` of the executable at `path`, loaded for
// `loaded_on`, on a queue of `device` with the given argument counts;
// throws InvalidArgumentError naming the entry and the counts.
void check_dispatch(const EntryInfo& info, const std::string& path, int loaded_on, int device,
                    size_t bindings, size_t scalars);

}  // namespace openneuron::hal
