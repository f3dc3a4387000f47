// Device bookkeeping for the integration layer: count, current device,
// index checks, lazy initialisation and fork safety.
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace openneuron::integration {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

c10::DeviceIndex device_count() noexcept;
// Why there is no device (the driver's error: no Vulkan loader, a bad
// setting); empty when there are devices.
std::string unavailable_reason();
// Throws a c10::Error saying how many devices exist when `index` is invalid.
void check_device_index(c10::DeviceIndex index);
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
// Resolves -1 to the current device and checks the result.
c10::DeviceIndex resolve_device_index(c10::DeviceIndex index);

// Called on first real use of a device (allocation, stream, event): refuses
// to run in a child forked after the parent initialised the device.
void lazy_init();
bool is_initialized();
bool in_bad_fork();

}  // namespace openneuron::integration
