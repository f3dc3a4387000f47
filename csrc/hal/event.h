// An event marks a point in a queue. It completes when every command enqueued
// before its record has finished; with timing enabled it also stores when.
#pragma once

namespace openneuron::hal {

class Event {
 public:
  virtual ~Event() = default;
  virtual int device() const = 0;
  // True once the work before the latest record finished (or never recorded).
  virtual bool query() const = 0;
  // Blocks the calling thread until query() is true.
  virtual void synchronize() const = 0;
  // Milliseconds from this event to `end`; both must be recorded, completed
  // and created with timing enabled, otherwise throws InvalidArgumentError.
  virtual double elapsed_ms(const Event& end) const = 0;
  virtual bool timing_enabled() const = 0;
};

}  // namespace openneuron::hal
