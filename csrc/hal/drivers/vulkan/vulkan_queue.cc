#include "hal/drivers/vulkan/vulkan_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "hal/config.h"
#include "hal/drivers/vulkan/vulkan_device.h"
#include "hal/drivers/vulkan/vulkan_event.h"
#include "hal/drivers/vulkan/vulkan_executable.h"
#include "hal/error.h"

namespace openneuron::hal {

using vk::api;

namespace {

constexpr size_t kArgumentBlockBytes = size_t{64} << 10;
constexpr size_t kFillChunkBytes = size_t{64} << 10;

void memory_barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  api().vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

// Makes the batch's copies into staging visible to host reads.
void host_read_barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  api().vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                             &barrier, 0, nullptr, 0, nullptr);
}

void copy_region(VkCommandBuffer cmd, VkBuffer src, VkDeviceSize src_offset, VkBuffer dst,
                 VkDeviceSize dst_offset, VkDeviceSize bytes) {
  VkBufferCopy region{src_offset, dst_offset, bytes};
  api().vkCmdCopyBuffer(cmd, src, dst, 1, &region);
}

}  // namespace

VulkanQueueCore::VulkanQueueCore(VulkanDevice& device, VulkanMemory& memory, StagingPool& staging,
                                 HostImports& host_imports, int hardware_queue)
    : device_(device), memory_(memory), staging_(staging), host_imports_(host_imports),
      hardware_queue_(hardware_queue) {
  VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  info.pNext = &type;
  vk::check(api().vkCreateSemaphore(device.handle(), &info, nullptr, &timeline_),
            "vkCreateSemaphore");
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = device.queue_family();
  const VkResult r = api().vkCreateCommandPool(device.handle(), &pool, nullptr, &pool_);
  if (r != VK_SUCCESS) api().vkDestroySemaphore(device.handle(), timeline_, nullptr);
  vk::check(r, "vkCreateCommandPool");
}

VulkanQueueCore::~VulkanQueueCore() {
  try {
    synchronize();
  } catch (...) {
    // Errors of a queue nobody can ask any more are dropped, as CUDA does.
  }
  {
    std::lock_guard lock(worker_mutex_);
    stopping_ = true;
  }
  worker_cv_.notify_all();
  if (worker_.joinable()) {
    if (worker_.get_id() == std::this_thread::get_id()) {
      worker_.detach();  // the last reference went away in our own host task
    } else {
      worker_.join();
    }
  }
  {
    std::lock_guard lock(mutex_);
    retire_locked(/*block=*/true);
    if (recording_) {
      api().vkEndCommandBuffer(recording_->commands);
      free_command_buffers_.push_back(recording_->commands);
      recording_.reset();
    }
  }
  device_.wait_idle(hardware_queue_);
  for (VkCommandBuffer cmd : free_command_buffers_)
    api().vkFreeCommandBuffers(device_.handle(), pool_, 1, &cmd);
  api().vkDestroyCommandPool(device_.handle(), pool_, nullptr);
  api().vkDestroySemaphore(device_.handle(), timeline_, nullptr);
}

int VulkanQueueCore::device() const { return device_.index(); }

// ---- recording -------------------------------------------------------------

VulkanQueueCore::Batch& VulkanQueueCore::batch() {
  if (recording_) return *recording_;
  auto b = std::make_unique<Batch>();
  if (!free_command_buffers_.empty()) {
    b->commands = free_command_buffers_.back();
    free_command_buffers_.pop_back();
  } else {
    VkCommandBufferAllocateInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    info.commandPool = pool_;
    info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    info.commandBufferCount = 1;
    vk::check(api().vkAllocateCommandBuffers(device_.handle(), &info, &b->commands),
              "vkAllocateCommandBuffers");
  }
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk::check(api().vkBeginCommandBuffer(b->commands, &begin), "vkBeginCommandBuffer");
  hazards_.reset();
  recording_ = std::move(b);
  return *recording_;
}

void VulkanQueueCore::begin_command(const HazardTracker::Access& access) {
  Batch& b = batch();
  if (hazards_.needs_barrier(access)) memory_barrier(b.commands);
}

void VulkanQueueCore::end_command() {
  Batch& b = *recording_;
  ++b.count;
  // Submit at once when nothing of ours is in flight, so the device never
  // waits for a batch to fill; else let the batch grow.
  const bool idle = work_in_chain_ == 0 && semaphore_value() >= last_submitted_;
  if (idle || b.count >= kMaxBatchCommands) submit_locked();
}

void VulkanQueueCore::submit_locked() {
  if (!recording_ && pending_waits_.empty()) return;
  Batch& b = batch();
  if (b.reads_back) host_read_barrier(b.commands);
  vk::check(api().vkEndCommandBuffer(b.commands), "vkEndCommandBuffer");
  if (b.arguments) b.staging.push_back(std::move(b.arguments));
  if (last_value_ > 0) {
    b.wait_semaphores.push_back(timeline_);
    b.wait_values.push_back(last_value_);
  }
  for (auto& [semaphore, value] : pending_waits_) {
    b.wait_semaphores.push_back(semaphore);
    b.wait_values.push_back(value);
  }
  pending_waits_.clear();
  for (auto& keep : pending_keep_alive_) b.keep_alive.push_back(std::move(keep));
  pending_keep_alive_.clear();
  b.signal = ++last_value_;
  last_submitted_ = b.signal;
  std::unique_ptr<Batch> ready = std::move(recording_);
  if (work_in_chain_ > 0) {
    // A host task ahead of it signals the value it waits for: submit after
    // that task ran, never a batch that waits on a signal still to come.
    WorkItem item;
    item.batch = std::move(ready);
    enqueue_work(std::move(item));
  } else {
    submit_now(std::move(ready));
  }
  retire_locked(/*block=*/false);
}

void VulkanQueueCore::submit_now(std::unique_ptr<Batch> b) {
  std::vector<VkPipelineStageFlags> stages(b->wait_semaphores.size(),
                                           VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  VkTimelineSemaphoreSubmitInfo timeline{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  timeline.waitSemaphoreValueCount = static_cast<uint32_t>(b->wait_values.size());
  timeline.pWaitSemaphoreValues = b->wait_values.data();
  timeline.signalSemaphoreValueCount = 1;
  timeline.pSignalSemaphoreValues = &b->signal;
  VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  info.pNext = &timeline;
  info.waitSemaphoreCount = static_cast<uint32_t>(b->wait_semaphores.size());
  info.pWaitSemaphores = b->wait_semaphores.data();
  info.pWaitDstStageMask = stages.data();
  info.commandBufferCount = 1;
  info.pCommandBuffers = &b->commands;
  info.signalSemaphoreCount = 1;
  info.pSignalSemaphores = &timeline_;
  try {
    device_.submit(hardware_queue_, info);
  } catch (...) {
    // The batch never runs: signal its value so nothing waits forever, and
    // report the failure at the next synchronize.
    VkSemaphoreSignalInfo signal{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
    signal.semaphore = timeline_;
    signal.value = b->signal;
    api().vkSignalSemaphore(device_.handle(), &signal);
    std::lock_guard lock(worker_mutex_);
    if (!first_error_) first_error_ = std::current_exception();
  }
  in_flight_.push_back(std::move(b));
}

void VulkanQueueCore::retire_locked(bool block) {
  while (!in_flight_.empty()) {
    Batch& b = *in_flight_.front();
    if (block) {
      try {
        wait_value(b.signal);
      } catch (...) {
        // A lost device: its resources are released regardless.
      }
    } else if (semaphore_value() < b.signal) {
      break;
    }
    api().vkResetCommandBuffer(b.commands, 0);
    free_command_buffers_.push_back(b.commands);
    for (auto& buffer : b.staging) staging_.release(std::move(buffer));
    in_flight_.pop_front();
  }
}

VkDeviceAddress VulkanQueueCore::argument_block(const void* data, size_t bytes) {
  Batch& b = batch();
  b.arguments_used = (b.arguments_used + 15) & ~size_t{15};
  if (!b.arguments || b.arguments_used + bytes > b.arguments->bytes) {
    if (b.arguments) b.staging.push_back(std::move(b.arguments));
    b.arguments = staging_.acquire(std::max(bytes, kArgumentBlockBytes));
    b.arguments_used = 0;
  }
  std::memcpy(static_cast<char*>(b.arguments->mapped) + b.arguments_used, data, bytes);
  const VkDeviceAddress address = b.arguments->address + b.arguments_used;
  b.arguments_used += bytes;
  return address;
}

// ---- the worker ------------------------------------------------------------

void VulkanQueueCore::enqueue_work(WorkItem item) {
  std::lock_guard lock(worker_mutex_);
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  if (item.batch || item.signal_value) ++work_in_chain_;
  if (item.read_back) ++read_backs_pending_;
  work_.push_back(std::move(item));
  ++work_enqueued_;
  worker_cv_.notify_all();
}

void VulkanQueueCore::worker_loop() {
  for (;;) {
    WorkItem item;
    {
      std::unique_lock lock(worker_mutex_);
      worker_cv_.wait(lock, [&] { return stopping_ || !work_.empty(); });
      if (work_.empty()) return;
      item = std::move(work_.front());
      work_.pop_front();
    }
    const bool in_chain = item.batch || item.signal_value;
    const bool read_back = item.read_back != nullptr;
    try {
      for (auto& [queue, items] : item.host_waits) queue->wait_until(0, items);
      if (item.batch) {
        std::lock_guard lock(mutex_);
        submit_now(std::move(item.batch));
      } else {
        wait_value(item.wait_value);
        if (item.read_back) {
          std::memcpy(item.read_back_dst, item.read_back->mapped, item.read_back_bytes);
        } else {
          item.fn();
        }
      }
    } catch (...) {
      std::lock_guard lock(worker_mutex_);
      if (!first_error_) first_error_ = std::current_exception();
    }
    if (item.read_back) staging_.release(std::move(item.read_back));
    if (item.signal_value) {
      // The chain goes on even when the task failed (as on the host driver).
      VkSemaphoreSignalInfo signal{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
      signal.semaphore = timeline_;
      signal.value = item.signal_value;
      api().vkSignalSemaphore(device_.handle(), &signal);
    }
    item = WorkItem{};  // drop references (other queues) before counting it done
    {
      std::lock_guard lock(worker_mutex_);
      ++work_done_;
      if (in_chain) --work_in_chain_;
      if (read_back) --read_backs_pending_;
    }
    worker_cv_.notify_all();
  }
}

// ---- waiting ---------------------------------------------------------------

uint64_t VulkanQueueCore::semaphore_value() const {
  uint64_t value = 0;
  vk::check(api().vkGetSemaphoreCounterValue(device_.handle(), timeline_, &value),
            "vkGetSemaphoreCounterValue");
  return value;
}

void VulkanQueueCore::wait_value(uint64_t value) const {
  if (value == 0) return;
  VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  info.semaphoreCount = 1;
  info.pSemaphores = &timeline_;
  info.pValues = &value;
  vk::check(api().vkWaitSemaphores(device_.handle(), &info, UINT64_MAX), "vkWaitSemaphores");
}

bool VulkanQueueCore::reached(uint64_t value, uint64_t host_items) const {
  {
    std::lock_guard lock(worker_mutex_);
    if (work_done_ < host_items) return false;
  }
  return semaphore_value() >= value;
}

void VulkanQueueCore::wait_until(uint64_t value, uint64_t host_items) const {
  // The worker first: once its items ran, every value it signals is set,
  // so the semaphore wait below never waits on a host signal in flight on
  // another thread (which the validation layer of Debian bookworm, 1.3.239,
  // mis-tracks: it reported a 10 s "state timeout").
  {
    std::unique_lock lock(worker_mutex_);
    worker_cv_.wait(lock, [&] { return work_done_ >= host_items; });
  }
  wait_value(value);
}

void VulkanQueueCore::rethrow_errors() {
  std::exception_ptr error;
  {
    std::lock_guard lock(worker_mutex_);
    error = std::exchange(first_error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
  if (config().vulkan_validation) {
    const std::string message = take_vulkan_validation_message();
    if (!message.empty()) throw Error("Vulkan validation layer: " + message);
  }
}

void VulkanQueueCore::flush() {
  std::lock_guard lock(mutex_);
  submit_locked();
}

bool VulkanQueueCore::query() {
  uint64_t value, items;
  {
    std::lock_guard lock(mutex_);
    submit_locked();
    value = last_value_;
    std::lock_guard worker_lock(worker_mutex_);
    items = work_enqueued_;
  }
  return reached(value, items);
}

void VulkanQueueCore::synchronize() {
  uint64_t value, items;
  {
    std::lock_guard lock(mutex_);
    submit_locked();
    value = last_value_;
    std::lock_guard worker_lock(worker_mutex_);
    items = work_enqueued_;
  }
  wait_until(value, items);
  {
    std::lock_guard lock(mutex_);
    retire_locked(/*block=*/false);
  }
  rethrow_errors();
}

// ---- commands --------------------------------------------------------------

void VulkanQueueCore::staged_upload(VulkanMemory::Resolved dst, const void* src, size_t bytes) {
  auto staging = staging_.acquire(bytes);
  std::memcpy(staging->mapped, src, bytes);
  Batch& b = batch();
  copy_region(b.commands, staging->buffer, 0, dst.buffer, dst.offset, bytes);
  b.staging.push_back(std::move(staging));
}

// A copy between device memory and pinned host memory the device imported
// (vulkan_host_import.h): one transfer command on the block itself, of any
// size. False when the host side is not such memory.
bool VulkanQueueCore::copy_pinned(void* dst, const void* src, size_t bytes, CopyKind kind) {
  const bool upload = kind == CopyKind::HostToDevice;
  const auto host = host_imports_.resolve(upload ? src : dst, bytes);
  if (!host) return false;
  const auto device = memory_.resolve(upload ? dst : src, bytes);
  if (upload) {
    // A staged read-back into this memory, if any, lands first (as below).
    std::unique_lock lock(worker_mutex_);
    worker_cv_.wait(lock, [&] { return read_backs_pending_ == 0; });
  }
  std::lock_guard lock(mutex_);
  // Host ranges are tracked like device ones: a download into a block and
  // an upload from it in one batch get a barrier between them.
  begin_command(HazardTracker::copy(dst, src, bytes));
  Batch& b = batch();
  if (upload) {
    copy_region(b.commands, host->buffer, host->offset, device.buffer, device.offset, bytes);
    end_command();
    return true;
  }
  copy_region(b.commands, device.buffer, device.offset, host->buffer, host->offset, bytes);
  b.reads_back = true;  // visible to the host when the batch completes
  ++b.count;
  submit_locked();  // the host will wait for it: start it now
  return true;
}

void VulkanQueueCore::copy_async(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  if (kind != CopyKind::DeviceToDevice && copy_pinned(dst, src, bytes, kind)) return;
  switch (kind) {
    case CopyKind::HostToDevice: {
      const auto target = memory_.resolve(dst, bytes);
      {
        // Like CUDA's copies from pageable memory: the bytes are read now,
        // so a read-back still queued into them must land first.
        std::unique_lock lock(worker_mutex_);
        worker_cv_.wait(lock, [&] { return read_backs_pending_ == 0; });
      }
      for (size_t done = 0; done < bytes; done += kMaxStagedCopy) {
        const size_t n = std::min(kMaxStagedCopy, bytes - done);
        uint64_t value;
        {
          std::lock_guard lock(mutex_);
          begin_command(HazardTracker::write_only(static_cast<char*>(dst) + done, n));
          staged_upload({target.buffer, target.offset + done, 0},
                        static_cast<const char*>(src) + done, n);
          end_command();
          if (bytes <= kMaxStagedCopy) return;
          submit_locked();  // large copies: piece by piece, bounded staging
          value = last_value_;
        }
        wait_value(value);
      }
      return;
    }
    case CopyKind::DeviceToHost: {
      const auto source = memory_.resolve(src, bytes);
      for (size_t done = 0; done < bytes; done += kMaxStagedCopy) {
        const size_t n = std::min(kMaxStagedCopy, bytes - done);
        WorkItem item;
        item.read_back = staging_.acquire(n);
        item.read_back_dst = static_cast<char*>(dst) + done;
        item.read_back_bytes = n;
        {
          std::lock_guard lock(mutex_);
          begin_command(HazardTracker::read_only(static_cast<const char*>(src) + done, n));
          Batch& b = batch();
          copy_region(b.commands, source.buffer, source.offset + done, item.read_back->buffer, 0, n);
          b.reads_back = true;
          ++b.count;
          submit_locked();
          item.wait_value = last_value_;
        }
        if (bytes <= kMaxStagedCopy) {
          enqueue_work(std::move(item));
          return;
        }
        wait_value(item.wait_value);  // large copies: piece by piece
        std::memcpy(item.read_back_dst, item.read_back->mapped, n);
        staging_.release(std::move(item.read_back));
      }
      return;
    }
    case CopyKind::DeviceToDevice: {
      const auto source = memory_.resolve(src, bytes);
      const auto target = memory_.resolve(dst, bytes);
      std::lock_guard lock(mutex_);
      begin_command(HazardTracker::copy(dst, src, bytes));
      copy_region(recording_->commands, source.buffer, source.offset, target.buffer, target.offset,
                  bytes);
      end_command();
      return;
    }
  }
}

void VulkanQueueCore::fill(DeviceAddress dst, size_t bytes, uint64_t pattern, int pattern_size) {
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8)
    throw InvalidArgumentError("fill: pattern size must be 1, 2, 4 or 8, got " +
                               std::to_string(pattern_size));
  if (bytes % pattern_size != 0)
    throw InvalidArgumentError("fill: " + std::to_string(bytes) +
                               " bytes is not a multiple of the pattern size " +
                               std::to_string(pattern_size));
  if (bytes == 0) return;
  const auto target = memory_.resolve(dst, bytes);
  auto pattern_byte = [&](size_t i) {
    return static_cast<uint8_t>(pattern >> (8 * (i % pattern_size)));
  };
  std::lock_guard lock(mutex_);
  begin_command(HazardTracker::write_only(dst, bytes));
  if (pattern_size <= 4 && target.offset % 4 == 0 && bytes % 4 == 0) {
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) word |= uint32_t{pattern_byte(i)} << (8 * i);
    api().vkCmdFillBuffer(recording_->commands, target.buffer, target.offset, bytes, word);
    end_command();
    return;
  }
  // Any size and alignment: one chunk of the pattern from staging, then
  // doubling copies of what is already filled (on the device, no bus).
  size_t chunk = std::min(bytes, kFillChunkBytes);
  chunk -= chunk % pattern_size;
  auto staging = staging_.acquire(chunk);
  auto* bytes_out = static_cast<uint8_t*>(staging->mapped);
  for (size_t i = 0; i < chunk; ++i) bytes_out[i] = pattern_byte(i);
  Batch& b = batch();
  copy_region(b.commands, staging->buffer, 0, target.buffer, target.offset, chunk);
  b.staging.push_back(std::move(staging));
  for (size_t filled = chunk; filled < bytes;) {
    const size_t n = std::min(filled, bytes - filled);
    memory_barrier(b.commands);
    copy_region(b.commands, target.buffer, target.offset, target.buffer, target.offset + filled, n);
    filled += n;
  }
  hazards_.needs_barrier(HazardTracker::everything());  // the next command barriers
  end_command();
}

void VulkanQueueCore::update(DeviceAddress dst, const void* src, size_t bytes) {
  if (bytes > Queue::kMaxUpdateBytes)
    throw InvalidArgumentError("update: " + std::to_string(bytes) + " bytes is more than " +
                               std::to_string(Queue::kMaxUpdateBytes));
  if (bytes == 0) return;
  const auto target = memory_.resolve(dst, bytes);
  std::lock_guard lock(mutex_);
  begin_command(HazardTracker::write_only(dst, bytes));
  staged_upload(target, src, bytes);
  end_command();
}

void VulkanQueueCore::dispatch(VulkanExecutable& executable, int entry,
                               std::span<const DeviceAddress> bindings,
                               std::span<const int64_t> scalars, Grid grid) {
  const EntryInfo& info = executable.entry_info(entry);
  const int64_t counts[3] = {grid.x, grid.y, grid.z};
  for (int axis = 0; axis < 3; ++axis) {
    if (counts[axis] < 0 || counts[axis] > device_.max_workgroups(axis))
      throw InvalidArgumentError("dispatch of '" + info.name + "': " +
                                 std::to_string(counts[axis]) + " workgroups on axis " +
                                 std::to_string(axis) + " (the device allows " +
                                 std::to_string(device_.max_workgroups(axis)) + ")");
  }
  // Arguments: binding addresses, then scalars (spirv_executable_file.h).
  std::vector<uint64_t> arguments(bindings.size() + scalars.size());
  for (size_t i = 0; i < bindings.size(); ++i)
    arguments[i] = bindings[i] ? memory_.resolve(bindings[i], 0).address : 0;
  std::memcpy(arguments.data() + bindings.size(), scalars.data(), scalars.size() * 8);
  const VkPipeline pipeline = executable.pipeline(entry);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  std::lock_guard lock(mutex_);
  begin_command(HazardTracker::everything());
  const VkDeviceAddress block = arguments.empty()
                                    ? 0
                                    : argument_block(arguments.data(), arguments.size() * 8);
  VkCommandBuffer cmd = recording_->commands;
  api().vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  api().vkCmdPushConstants(cmd, device_.pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           sizeof(block), &block);
  api().vkCmdDispatch(cmd, static_cast<uint32_t>(grid.x), static_cast<uint32_t>(grid.y),
                      static_cast<uint32_t>(grid.z));
  end_command();
}

void VulkanQueueCore::host_task(std::function<void()> fn) {
  std::lock_guard lock(mutex_);
  submit_locked();
  WorkItem item;
  item.wait_value = last_value_;
  item.signal_value = ++last_value_;
  item.fn = std::move(fn);
  item.host_waits = std::move(pending_host_waits_);
  pending_host_waits_.clear();
  enqueue_work(std::move(item));
}

void VulkanQueueCore::record(VulkanEventState& event, bool timing) {
  VulkanEventState::Mark mark;
  {
    std::lock_guard lock(mutex_);
    if (timing) {
      mark.timestamp = std::make_shared<TimestampQuery>(device_);
      VkCommandBuffer cmd = batch().commands;
      api().vkCmdResetQueryPool(cmd, mark.timestamp->pool(), 0, 1);
      api().vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, mark.timestamp->pool(), 0);
      recording_->keep_alive.push_back(mark.timestamp);
    }
    submit_locked();
    mark.queue = shared_from_this();
    mark.value = last_value_;
    std::lock_guard worker_lock(worker_mutex_);
    mark.host_items = work_enqueued_;
  }
  event.set(std::move(mark));
}

void VulkanQueueCore::wait(const VulkanEventState& event) {
  auto mark = event.mark();
  if (!mark.queue || mark.queue.get() == this) return;  // our own order already holds
  std::lock_guard lock(mutex_);
  if (recording_ && recording_->count > 0) submit_locked();  // earlier work need not wait
  pending_waits_.emplace_back(mark.queue->timeline(), mark.value);
  pending_host_waits_.emplace_back(mark.queue, mark.host_items);
  pending_keep_alive_.push_back(std::move(mark.queue));
}

// ---- VulkanQueue -----------------------------------------------------------

void VulkanQueue::dispatch(Executable& executable, int entry,
                           std::span<const DeviceAddress> bindings,
                           std::span<const int64_t> scalars, Grid grid) {
  VulkanExecutable& exe =
      checked_vulkan_executable(executable, device_, entry, bindings.size(), scalars.size());
  core_->dispatch(exe, entry, bindings, scalars, grid);
}

void VulkanQueue::record(Event& event) {
  auto* e = dynamic_cast<VulkanEvent*>(&event);
  if (e == nullptr || e->device() != device_)
    throw InvalidArgumentError("record: the event belongs to another device or driver");
  core_->record(e->state(), e->timing_enabled());
}

void VulkanQueue::wait(const Event& event) {
  const auto* e = dynamic_cast<const VulkanEvent*>(&event);
  if (e == nullptr) throw InvalidArgumentError("wait: the event belongs to another driver");
  core_->wait(e->state());
}

}  // namespace openneuron::hal
