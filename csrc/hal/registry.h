// The table of drivers by name. driver() (driver.h) uses it to build the
// process-wide driver; tests use it to check each driver in isolation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hal/driver.h"

namespace openneuron::hal {

// Names accepted by OPENNEURON_DRIVER, in registration order.
std::vector<std::string> driver_names();

// A new, independent instance of the named driver. Throws Error listing the
// known drivers for an unknown name.
std::unique_ptr<Driver> create_driver(const std::string& name);

}  // namespace openneuron::hal
