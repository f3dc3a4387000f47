#include "torch/runtime/transfer_stats.h"

#include <atomic>

#include "torch/runtime/fast_tls.h"

namespace openneuron::integration {
namespace {

struct AtomicCount {
  std::atomic<int64_t> count{0};
  std::atomic<int64_t> bytes{0};
};

AtomicCount g_counts[kNumDirections][kNumCauses];
OPENNEURON_FAST_TLS thread_local Cause tls_cause = Cause::Copy;

}  // namespace

const char* to_string(Direction d) {
  switch (d) {
    case Direction::HostToDevice: return "host_to_device";
    case Direction::DeviceToHost: return "device_to_host";
    case Direction::DeviceToDevice: return "device_to_device";
  }
  return "?";
}

const char* to_string(Cause c) {
  switch (c) {
    case Cause::Copy: return "copy";
    case Cause::CpuFallback: return "cpu_fallback";
    case Cause::KernelOutput: return "kernel_output";
  }
  return "?";
}

void record_transfer(Direction direction, size_t bytes) {
  auto& c = g_counts[int(direction)][int(tls_cause)];
  c.count.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(int64_t(bytes), std::memory_order_relaxed);
}

TransferCount transfer_count(Direction direction, Cause cause) {
  const auto& c = g_counts[int(direction)][int(cause)];
  return {c.count.load(), c.bytes.load()};
}

void reset_transfer_stats() {
  for (auto& row : g_counts)
    for (auto& c : row) {
      c.count = 0;
      c.bytes = 0;
    }
}

Cause current_transfer_cause() { return tls_cause; }

TransferCauseGuard::TransferCauseGuard(Cause cause) : previous_(tls_cause) {
  tls_cause = cause;
}
TransferCauseGuard::~TransferCauseGuard() { tls_cause = previous_; }

}  // namespace openneuron::integration
