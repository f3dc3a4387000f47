// torch.neuron.set_sync_debug_mode, as torch.cuda's: in "warn" (1) or
// "error" (2) mode every operation that makes the host wait for a device
// (.item(), a blocking copy to or from the host, nonzero and the other ops
// whose result size depends on device values, an op run on the CPU
// fallback of a device the host cannot address) warns or raises, naming
// the op. Explicit synchronization (synchronize(), Stream/Event
// synchronize) never does. The check is one relaxed load when off.
#pragma once

#include <atomic>

#include <c10/macros/Macros.h>

namespace openneuron::integration {

enum class SyncDebugMode : int { Default = 0, Warn = 1, Error = 2 };

void set_sync_debug_mode(int mode);
int sync_debug_mode();

namespace detail {
extern std::atomic<int> g_sync_debug_mode;
[[gnu::cold]] void report_host_sync(const char* op, const char* why);
}  // namespace detail

// The host is about to wait for the device on behalf of `op`.
inline void note_host_sync(const char* op, const char* why = nullptr) {
  if (C10_UNLIKELY(detail::g_sync_debug_mode.load(std::memory_order_relaxed) != 0))
    detail::report_host_sync(op, why);
}

}  // namespace openneuron::integration
