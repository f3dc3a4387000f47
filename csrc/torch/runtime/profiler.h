// torch.profiler's device activities for neuron: each kernel and copy the
// integration puts on a queue while the profiler records is timed with the
// HAL's timing events (every driver has them) and handed to Kineto, linked
// to the op that launched it, as CUDA's kernels are (profiler.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <c10/macros/Macros.h>
#include <c10/core/Device.h>

#include "hal/queue.h"

namespace openneuron::integration {

enum class DeviceActivityKind { Kernel, Copy, Fill };

namespace detail {
extern std::atomic<bool> g_profiler_recording;
struct ActivityRecord;
// begin_activity's record is end_activity's to keep.
ActivityRecord* begin_activity(hal::Queue* queue, c10::DeviceIndex device, const char* name,
                               DeviceActivityKind kind, int64_t bytes);
void end_activity(ActivityRecord* record, hal::Queue* queue);
}  // namespace detail

// Around the work one call puts on `queue` (timed on the device), or
// without a queue around a synchronous driver call (timed on the host);
// free when the profiler is off.
class DeviceActivity {
 public:
  DeviceActivity(hal::Queue* queue, c10::DeviceIndex device, const char* name, DeviceActivityKind kind,
                 int64_t bytes = 0)
      : queue_(queue) {
    if (C10_UNLIKELY(detail::g_profiler_recording.load(std::memory_order_relaxed)))
      record_ = detail::begin_activity(queue, device, name, kind, bytes);
  }
  ~DeviceActivity() {
    if (C10_UNLIKELY(record_ != nullptr)) detail::end_activity(record_, queue_);
  }
  DeviceActivity(const DeviceActivity&) = delete;
  DeviceActivity& operator=(const DeviceActivity&) = delete;

 private:
  hal::Queue* queue_;
  detail::ActivityRecord* record_ = nullptr;
};

}  // namespace openneuron::integration
