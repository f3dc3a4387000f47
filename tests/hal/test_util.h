// Helpers shared by the HAL test suites.
#pragma once

#include <functional>
#include <future>

namespace openneuron::hal::test_util {

// A host_task that blocks its queue until release(), so tests can hold a
// queue busy without relying on timing. Declare it after the queues it
// blocks: its destructor releases them before they are drained.
class Gate {
 public:
  std::function<void()> task() const {
    return [future = future_] { future.wait(); };
  }
  void release() {
    if (!released_) promise_.set_value();
    released_ = true;
  }
  ~Gate() { release(); }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
  bool released_ = false;
};

}  // namespace openneuron::hal::test_util
