#include "hal/drivers/host/host_event.h"

#include "hal/error.h"

namespace openneuron::hal {

uint64_t HostEventState::begin_record() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++recorded_;
}

void HostEventState::complete(uint64_t seq) {
  auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Markers on different queues may finish out of order; an older one
    // must not overwrite the time of a newer record.
    if (seq <= completed_) return;
    completed_ = seq;
    time_ = now;
  }
  cv_.notify_all();
}

uint64_t HostEventState::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

bool HostEventState::reached(uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= seq;
}

void HostEventState::wait(uint64_t seq) const {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_ >= seq; });
}

bool HostEventState::completed_time(Clock::time_point* time) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (recorded_ == 0 || completed_ < recorded_) return false;
  *time = time_;
  return true;
}

HostEvent::HostEvent(int device, bool enable_timing)
    : device_(device),
      timing_(enable_timing),
      state_(std::make_shared<HostEventState>()) {}

// Like CUDA, an event never recorded counts as completed.
bool HostEvent::query() const { return state_->reached(state_->latest()); }

void HostEvent::synchronize() const { state_->wait(state_->latest()); }

double HostEvent::elapsed_ms(const Event& end) const {
  const auto* other = dynamic_cast<const HostEvent*>(&end);
  if (other == nullptr) {
    throw InvalidArgumentError(
        "elapsed_ms: the end event was not created by the host driver");
  }
  if (!timing_ || !other->timing_) {
    throw InvalidArgumentError(
        "elapsed_ms: both events must be created with timing enabled");
  }
  HostEventState::Clock::time_point start_time, end_time;
  if (!state_->completed_time(&start_time) ||
      !other->state_->completed_time(&end_time)) {
    throw InvalidArgumentError(
        "elapsed_ms: both events must be recorded and completed");
  }
  return std::chrono::duration<double, std::milli>(end_time - start_time)
      .count();
}

}  // namespace openneuron::hal
