#include "hal/drivers/vulkan/vulkan_event.h"

#include "hal/drivers/vulkan/vulkan_device.h"
#include "hal/drivers/vulkan/vulkan_queue.h"
#include "hal/error.h"

namespace openneuron::hal {

using vk::api;

TimestampQuery::TimestampQuery(VulkanDevice& device) : device_(device) {
  VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  info.queryCount = 1;
  vk::check(api().vkCreateQueryPool(device.handle(), &info, nullptr, &pool_), "vkCreateQueryPool");
}

TimestampQuery::~TimestampQuery() { api().vkDestroyQueryPool(device_.handle(), pool_, nullptr); }

double TimestampQuery::nanoseconds() const {
  uint64_t ticks = 0;
  vk::check(api().vkGetQueryPoolResults(device_.handle(), pool_, 0, 1, sizeof(ticks), &ticks,
                                        sizeof(ticks), VK_QUERY_RESULT_64_BIT),
            "vkGetQueryPoolResults");
  return static_cast<double>(ticks) * device_.timestamp_period();
}

bool VulkanEvent::query() const {
  const auto mark = state_->mark();
  return !mark.queue || mark.queue->reached(mark.value, mark.host_items);
}

void VulkanEvent::synchronize() const {
  const auto mark = state_->mark();
  if (mark.queue) mark.queue->wait_until(mark.value, mark.host_items);
}

double VulkanEvent::elapsed_ms(const Event& end_event) const {
  const auto* end = dynamic_cast<const VulkanEvent*>(&end_event);
  if (end == nullptr) throw InvalidArgumentError("elapsed_ms: the end event is not a vulkan event");
  if (!timing_ || !end->timing_)
    throw InvalidArgumentError("elapsed_ms: both events must be created with timing enabled");
  const auto a = state_->mark();
  const auto b = end->state_->mark();
  if (!a.queue || !b.queue) throw InvalidArgumentError("elapsed_ms: both events must be recorded");
  if (!query() || !end->query())
    throw InvalidArgumentError("elapsed_ms: both events must have completed");
  return (b.timestamp->nanoseconds() - a.timestamp->nanoseconds()) / 1e6;
}

}  // namespace openneuron::hal
