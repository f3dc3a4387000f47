// Events of the Vulkan driver: a point on a queue's timeline (semaphore
// value, plus how many of its host items had been queued), and with timing
// a timestamp query written by the device when it gets there.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "hal/drivers/vulkan/vulkan_api.h"
#include "hal/event.h"

namespace openneuron::hal {

class VulkanDevice;
class VulkanQueueCore;

// A one-query pool; batches that write it keep it alive.
class TimestampQuery {
 public:
  explicit TimestampQuery(VulkanDevice& device);
  ~TimestampQuery();
  VkQueryPool pool() const { return pool_; }
  // Device ticks converted to nanoseconds; throws when not available.
  double nanoseconds() const;

 private:
  VulkanDevice& device_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
};

class VulkanEventState {
 public:
  struct Mark {
    std::shared_ptr<VulkanQueueCore> queue;  // null: never recorded
    uint64_t value = 0;
    uint64_t host_items = 0;
    std::shared_ptr<TimestampQuery> timestamp;
  };
  Mark mark() const {
    std::lock_guard lock(mutex_);
    return mark_;
  }
  void set(Mark mark) {
    std::lock_guard lock(mutex_);
    mark_ = std::move(mark);
  }

 private:
  mutable std::mutex mutex_;
  Mark mark_;
};

class VulkanEvent : public Event {
 public:
  VulkanEvent(int device, bool enable_timing) : device_(device), timing_(enable_timing) {}
  int device() const override { return device_; }
  bool query() const override;
  void synchronize() const override;
  double elapsed_ms(const Event& end) const override;
  bool timing_enabled() const override { return timing_; }
  VulkanEventState& state() const { return *state_; }

 private:
  int device_;
  bool timing_;
  std::shared_ptr<VulkanEventState> state_ = std::make_shared<VulkanEventState>();
};

}  // namespace openneuron::hal
