// Helpers shared by the HAL test suites.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <vector>

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

#if OPENNEURON_HAL_VULKAN
// GLSL compute source to SPIR-V (shaderc, Vulkan 1.2); throws with the
// compiler's message.
std::vector<uint32_t> compile_glsl(const std::string& source, const std::string& name);
#endif

}  // namespace openneuron::hal::test_util
