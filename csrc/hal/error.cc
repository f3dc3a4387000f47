#include "hal/error.h"

#include <cstdio>
#include <string>

namespace openneuron::hal {
namespace {

std::string invalid_device_message(int device, int device_count) {
  std::string msg = "Invalid device index " + std::to_string(device) + ": ";
  if (device_count <= 0) {
    msg += "there are no OpenNeuron devices.";
  } else if (device_count == 1) {
    msg += "there is 1 OpenNeuron device (valid index 0).";
  } else {
    msg += "there are " + std::to_string(device_count) +
           " OpenNeuron devices (valid indices 0.." +
           std::to_string(device_count - 1) + ").";
  }
  return msg + " Set OPENNEURON_HOST_DEVICES to change the count.";
}

// The message users see for torch.OutOfMemoryError: what was asked, what the
// device holds, what bounded it, and the three ways out.
std::string oom_message(int device, size_t requested, size_t allocated,
                        size_t reserved, const std::string& limit) {
  return "OpenNeuron out of memory on device " + std::to_string(device) +
         ": tried to allocate " + format_bytes(requested) + "; " +
         format_bytes(allocated) + " allocated by PyTorch and " +
         format_bytes(reserved) + " reserved on this device; " + limit +
         ". Free tensors, call torch.neuron.empty_cache(), or raise that "
         "limit.";
}

}  // namespace

InvalidDeviceError::InvalidDeviceError(int device, int device_count)
    : Error(invalid_device_message(device, device_count)),
      device_(device),
      device_count_(device_count) {}

OutOfMemoryError::OutOfMemoryError(int device, size_t requested,
                                   size_t capacity, size_t allocated,
                                   size_t reserved, const std::string& limit)
    : Error(oom_message(device, requested, allocated, reserved, limit)),
      device_(device),
      requested_(requested),
      capacity_(capacity),
      allocated_(allocated),
      reserved_(reserved) {}

std::string format_bytes(size_t bytes) {
  if (bytes == 1) return "1 byte";
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB",
                                       "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s", value, kUnits[unit]);
  return buf;
}

}  // namespace openneuron::hal
