#include "hal/executable.h"

#include "hal/error.h"

namespace openneuron::hal {

void check_dispatch(const EntryInfo& info, const std::string& path, int loaded_on, int device,
                    size_t bindings, size_t scalars) {
  if (loaded_on != device)
    throw InvalidArgumentError("dispatch: executable " + path + " was loaded for device " +
                               std::to_string(loaded_on) + ", dispatched on device " +
                               std::to_string(device));
  if (bindings != static_cast<size_t>(info.bindings) || scalars != static_cast<size_t>(info.scalars))
    throw InvalidArgumentError("dispatch of '" + info.name + "' (" + path + "): it takes " +
                               std::to_string(info.bindings) + " bindings and " +
                               std::to_string(info.scalars) + " scalars, got " +
                               std::to_string(bindings) + " and " + std::to_string(scalars));
}

}  // namespace openneuron::hal
