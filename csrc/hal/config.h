// HAL settings, read once from the environment. The README's table of
// environment variables documents each one.
#pragma once

#include <cstddef>
#include <string>

namespace openneuron::hal {

struct Config {
  std::string driver = "host";  // OPENNEURON_DRIVER
  int host_device_count = 4;    // OPENNEURON_HOST_DEVICES
  // OPENNEURON_HOST_DEVICE_MEMORY: bytes all host devices share (0 = default)
  size_t host_device_memory = 0;
};

// Parsed on first use; invalid values throw Error naming the variable.
const Config& config();

// Parses "512", "64MiB", "8GB", "1.5GiB" into bytes; throws Error otherwise.
size_t parse_bytes(const std::string& text, const char* variable);

}  // namespace openneuron::hal
