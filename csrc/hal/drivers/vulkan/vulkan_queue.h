// Queues of the Vulkan driver. Commands are recorded into a command buffer
// and submitted in batches; each queue has a timeline semaphore whose value
// counts its batches and host tasks, which orders them (each waits for the
// value before it) and is what events and other queues wait on.
//
// When a batch is submitted: at once while the device has nothing of this
// queue in flight (so it never idles waiting for a batch to fill), else when
// it holds kMaxBatchCommands commands or something observes the queue
// (synchronize, query, an event record, a host task, a copy to the host).
//
// Host work in queue order (host tasks, and the copy of a read-back from
// its staging buffer into the caller's memory) runs on a worker thread,
// started when first needed. Host tasks are links of the chain (the next
// batch waits for them, through a value the worker signals); read-backs are
// not (kernels never wait for them), only events and synchronize do.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "hal/drivers/vulkan/vulkan_api.h"
#include "hal/drivers/vulkan/vulkan_hazards.h"
#include "hal/drivers/vulkan/vulkan_host_import.h"
#include "hal/drivers/vulkan/vulkan_memory.h"
#include "hal/queue.h"

namespace openneuron::hal {

class VulkanDevice;
class VulkanEventState;
class VulkanExecutable;

class VulkanQueueCore : public std::enable_shared_from_this<VulkanQueueCore> {
 public:
  VulkanQueueCore(VulkanDevice& device, VulkanMemory& memory, StagingPool& staging, HostImports& host_imports,
                  int hardware_queue);
  ~VulkanQueueCore();
  static constexpr int kMaxBatchCommands = 128;
  // Copies above this go through staging in pieces, synchronously (as
  // CUDA's copies from pageable memory do), bounding staging memory.
  static constexpr size_t kMaxStagedCopy = size_t{16} << 20;

  int device() const;
  void copy_async(void* dst, const void* src, size_t bytes, CopyKind kind);
  void fill(DeviceAddress dst, size_t bytes, uint64_t pattern, int pattern_size);
  void update(DeviceAddress dst, const void* src, size_t bytes);
  void dispatch(VulkanExecutable& executable, int entry, std::span<const DeviceAddress> bindings,
                std::span<const int64_t> scalars, Grid grid);
  void host_task(std::function<void()> fn);
  void record(VulkanEventState& event, bool timing);
  void wait(const VulkanEventState& event);
  void flush();
  bool query();
  void synchronize();

  // For events: whether the timeline reached `value` and the worker ran
  // `host_items` items; and the blocking form.
  bool reached(uint64_t value, uint64_t host_items) const;
  void wait_until(uint64_t value, uint64_t host_items) const;
  VkSemaphore timeline() const { return timeline_; }
  VulkanDevice& vulkan_device() const { return device_; }

 private:
  struct Batch {
    VkCommandBuffer commands = VK_NULL_HANDLE;
    int count = 0;
    bool reads_back = false;  // holds copies the host reads afterwards
    uint64_t signal = 0;
    std::vector<std::unique_ptr<VulkanBuffer>> staging;
    std::vector<std::shared_ptr<void>> keep_alive;  // query pools, other queues
    std::vector<VkSemaphore> wait_semaphores;
    std::vector<uint64_t> wait_values;
    std::unique_ptr<VulkanBuffer> arguments;  // kernel arguments, bump-allocated
    size_t arguments_used = 0;
  };
  // One of: a host task (fn, signal_value), a read-back (staging copied to
  // the caller's memory), or a batch to submit after earlier host tasks.
  struct WorkItem {
    uint64_t wait_value = 0;
    std::function<void()> fn;
    uint64_t signal_value = 0;  // host tasks: the chain value signalled after
    std::unique_ptr<VulkanBuffer> read_back;
    void* read_back_dst = nullptr;
    size_t read_back_bytes = 0;
    std::unique_ptr<Batch> batch;
    std::vector<std::pair<std::shared_ptr<VulkanQueueCore>, uint64_t>> host_waits;
  };

  // With mutex_ held.
  Batch& batch();
  void begin_command(const HazardTracker::Access& access);
  void end_command();
  void submit_locked();
  void submit_now(std::unique_ptr<Batch> batch);
  void retire_locked(bool block);
  void enqueue_work(WorkItem item);
  VkDeviceAddress argument_block(const void* data, size_t bytes);
  void staged_upload(VulkanMemory::Resolved dst, const void* src, size_t bytes);
  bool copy_pinned(void* dst, const void* src, size_t bytes, CopyKind kind);
  void copy_to_host(void* dst, VulkanMemory::Resolved src, size_t bytes);
  void wait_value(uint64_t value) const;
  uint64_t semaphore_value() const;
  void worker_loop();
  void rethrow_errors();

  VulkanDevice& device_;
  VulkanMemory& memory_;
  StagingPool& staging_;
  HostImports& host_imports_;
  const int hardware_queue_;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;

  std::mutex mutex_;  // recording state below
  std::unique_ptr<Batch> recording_;
  HazardTracker hazards_;
  std::deque<std::unique_ptr<Batch>> in_flight_;
  std::vector<VkCommandBuffer> free_command_buffers_;
  uint64_t last_value_ = 0;       // the chain's latest value (batch or host task)
  uint64_t last_submitted_ = 0;   // the latest value a submitted batch signals
  std::vector<std::pair<VkSemaphore, uint64_t>> pending_waits_;
  std::vector<std::shared_ptr<void>> pending_keep_alive_;
  std::vector<std::pair<std::shared_ptr<VulkanQueueCore>, uint64_t>> pending_host_waits_;

  mutable std::mutex worker_mutex_;
  mutable std::condition_variable worker_cv_;
  std::deque<WorkItem> work_;
  uint64_t work_enqueued_ = 0, work_done_ = 0;
  // Queued host tasks and batches: while there are any, batches go through
  // the worker too. Read without worker_mutex_ by the recording thread.
  std::atomic<int> work_in_chain_{0};
  uint64_t read_backs_pending_ = 0;
  bool stopping_ = false;
  std::thread worker_;
  std::exception_ptr first_error_;
};

// The HAL face of a core: what create_queue returns.
class VulkanQueue : public Queue {
 public:
  VulkanQueue(std::shared_ptr<VulkanQueueCore> core, int device, int priority)
      : core_(std::move(core)), device_(device), priority_(priority) {}
  int device() const override { return device_; }
  int priority() const override { return priority_; }
  void copy_async(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    core_->copy_async(dst, src, bytes, kind);
  }
  void fill(DeviceAddress dst, size_t bytes, uint64_t pattern, int pattern_size) override {
    core_->fill(dst, bytes, pattern, pattern_size);
  }
  void update(DeviceAddress dst, const void* src, size_t bytes) override {
    core_->update(dst, src, bytes);
  }
  void dispatch(Executable& executable, int entry, std::span<const DeviceAddress> bindings,
                std::span<const int64_t> scalars, Grid grid) override;
  void host_task(std::function<void()> fn) override { core_->host_task(std::move(fn)); }
  void record(Event& event) override;
  void wait(const Event& event) override;
  void flush() override { core_->flush(); }
  bool query() const override { return core_->query(); }
  void synchronize() override { core_->synchronize(); }
  const std::shared_ptr<VulkanQueueCore>& core() const { return core_; }

 private:
  std::shared_ptr<VulkanQueueCore> core_;
  int device_;
  int priority_;
};

}  // namespace openneuron::hal
