#include "torch/runtime/device.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

#include <c10/util/Exception.h>

#include "hal/driver.h"
#include "hal/error.h"
#include "torch/runtime/fast_tls.h"

namespace openneuron::integration {
namespace {

OPENNEURON_FAST_TLS thread_local c10::DeviceIndex tls_current_device = 0;
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_in_bad_fork{false};

void mark_bad_fork_in_child() {
  if (g_initialized.load()) g_in_bad_fork = true;
}

std::string g_unavailable_reason;  // written once, by count_devices

c10::DeviceIndex count_devices() noexcept {
  try {
    return static_cast<c10::DeviceIndex>(hal::driver().device_count());
  } catch (const std::exception& e) {
    try {
      g_unavailable_reason = e.what();
    } catch (...) {
    }
    // A bad setting (OPENNEURON_HOST_DEVICES=abc) leaves no device; say why.
    try {
      TORCH_WARN("The neuron device is unavailable: ", e.what());
    } catch (...) {
    }
    return 0;
  }
}

}  // namespace

c10::DeviceIndex device_count() noexcept {
  // Fixed for the life of the process; asked on every op.
  static const c10::DeviceIndex count = count_devices();
  return count;
}

std::string unavailable_reason() {
  return device_count() > 0 ? std::string() : g_unavailable_reason;
}

void check_device_index(c10::DeviceIndex index) {
  const auto count = device_count();
  if (C10_UNLIKELY(count == 0)) {
    try {
      hal::driver().device_count();
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "The neuron device is unavailable: ", e.what());
    }
  }
  TORCH_CHECK_INDEX(
      index >= 0 && index < count, "Invalid device index neuron:", int(index),
      ": there are ", int(count), " neuron device(s), valid indices are 0..",
      int(count) - 1, ". Set ",
      hal::driver().name() == "vulkan" ? "OPENNEURON_VULKAN_DEVICES" : "OPENNEURON_HOST_DEVICES",
      " to change the devices.");
}

c10::DeviceIndex current_device() { return tls_current_device; }

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_current_device = index;
}

c10::DeviceIndex resolve_device_index(c10::DeviceIndex index) {
  if (index < 0) return tls_current_device;
  check_device_index(index);
  return index;
}

void lazy_init() {
  if (C10_LIKELY(g_initialized.load(std::memory_order_relaxed))) {
    TORCH_CHECK(!g_in_bad_fork.load(std::memory_order_relaxed),
                "Cannot re-initialize the neuron device in a forked "
                "subprocess. To use neuron with multiprocessing, use the "
                "'spawn' start method (or initialise the device only in the "
                "child).");
    return;
  }
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, mark_bad_fork_in_child);
    g_initialized = true;
  });
}

bool is_initialized() { return g_initialized.load(); }
bool in_bad_fork() { return g_in_bad_fork.load(); }

}  // namespace openneuron::integration
