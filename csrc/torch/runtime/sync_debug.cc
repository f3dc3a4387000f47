#include "torch/runtime/sync_debug.h"

#include <c10/util/Exception.h>

#include <string>

namespace openneuron::integration {

namespace detail {
std::atomic<int> g_sync_debug_mode{0};

void report_host_sync(const char* op, const char* why) {
  const int mode = g_sync_debug_mode.load(std::memory_order_relaxed);
  const std::string what = std::string("neuron: called a synchronizing operation: ") + op +
                           (why ? std::string(" (") + why + ")" : std::string()) +
                           "; the host waits for the device here";
  if (mode == static_cast<int>(SyncDebugMode::Error))
    TORCH_CHECK(false, what, ". torch.neuron.set_sync_debug_mode(\"error\") is on.");
  TORCH_WARN(what, ". torch.neuron.set_sync_debug_mode(\"warn\") is on.");
}
}  // namespace detail

void set_sync_debug_mode(int mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "invalid value of debug_mode, expected one of 0, 1, 2, got ", mode);
  detail::g_sync_debug_mode.store(mode, std::memory_order_relaxed);
}

int sync_debug_mode() { return detail::g_sync_debug_mode.load(std::memory_order_relaxed); }

}  // namespace openneuron::integration
