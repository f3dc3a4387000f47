// Events of the host driver. The state lives in a shared object so that a
// marker still queued can complete it after the Event itself was destroyed,
// and so that re-recording simply moves the target to a newer marker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "hal/event.h"

namespace openneuron::hal {

class HostEventState {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts a new record; returns the sequence number its marker completes.
  uint64_t begin_record();
  // Run by the marker command on the queue's worker thread.
  void complete(uint64_t seq);
  // The latest record at the time of the call (0: never recorded).
  uint64_t latest() const;
  // True once marker `seq` (or a later one) has run.
  bool reached(uint64_t seq) const;
  void wait(uint64_t seq) const;
  // Timestamp of the latest record, if it completed.
  bool completed_time(Clock::time_point* time) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  uint64_t recorded_ = 0;   // sequence number of the latest record
  uint64_t completed_ = 0;  // highest sequence number whose marker ran
  Clock::time_point time_;  // when marker `completed_` ran
};

class HostEvent : public Event {
 public:
  HostEvent(int device, bool enable_timing);
  int device() const override { return device_; }
  bool query() const override;
  void synchronize() const override;
  double elapsed_ms(const Event& end) const override;
  bool timing_enabled() const override { return timing_; }

  const std::shared_ptr<HostEventState>& state() const { return state_; }

 private:
  int device_;
  bool timing_;
  std::shared_ptr<HostEventState> state_;
};

}  // namespace openneuron::hal
