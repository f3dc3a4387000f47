// HAL settings, read once from the environment. The README's table of
// environment variables documents each one.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace openneuron::hal {

struct Config {
  std::string driver = "host";  // OPENNEURON_DRIVER
  int host_device_count = 4;    // OPENNEURON_HOST_DEVICES
  // OPENNEURON_HOST_DEVICE_MEMORY: bytes all host devices share (0 = default)
  size_t host_device_memory = 0;
  // OPENNEURON_VULKAN_DEVICES: physical-device indices, in the order they
  // become neuron devices ("1,0"; "0,0" makes two devices of one GPU);
  // empty = every qualifying device.
  std::vector<int> vulkan_devices;
  // OPENNEURON_VULKAN_VALIDATION=1: the Khronos validation layer, whose
  // messages are raised as errors (the test suite turns it on).
  bool vulkan_validation = false;
  // OPENNEURON_VULKAN_FP64=0: float64 shaders off even where the device
  // has them, as on GPUs without them (many integrated and mobile ones):
  // float64 ops then run elsewhere, never in float32. To test that path.
  bool vulkan_fp64 = true;
  // OPENNEURON_VULKAN_TILED_KERNELS=0: the library's shared-memory tiled
  // kernels (DeviceProperties::tiled_kernels) off, on devices whose limits
  // allow them (-1 when unset: on there). To test the kernels they replace.
  int vulkan_tiled_kernels = -1;
  // OPENNEURON_VULKAN_MATRIX_UNITS: "1" (the default) runs float16 products
  // on matrix units where the device has them (cooperative matrices);
  // "0" never; "emulate" runs that kernel with plain arithmetic instead on
  // any device with the tiled kernels (lavapipe in the tests).
  std::string vulkan_matrix_units = "1";
  // Where the Vulkan driver keeps its VkPipelineCache: beside the kernel
  // cache (OPENNEURON_COMPILE_CACHE_DIR); empty when caching is off
  // (OPENNEURON_COMPILE_CACHE=0).
  std::string vulkan_pipeline_cache_dir;
};

// Parsed on first use; invalid values throw Error naming the variable.
const Config& config();

// Parses "512", "64MiB", "8GB", "1.5GiB" into bytes; throws Error otherwise.
size_t parse_bytes(const std::string& text, const char* variable);

}  // namespace openneuron::hal
