// Queues of the host driver: one worker thread per queue runs the commands in
// FIFO order. The worker starts with the first command, so a queue that is
// never used costs no thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "hal/queue.h"

namespace openneuron::hal {

// The part of a queue the driver also reaches (for device synchronize); it is
// shared so the driver never sees a destroyed queue.
class HostQueueCore {
 public:
  HostQueueCore() = default;
  ~HostQueueCore();
  HostQueueCore(const HostQueueCore&) = delete;
  HostQueueCore& operator=(const HostQueueCore&) = delete;

  void enqueue(std::function<void()> command);
  bool idle() const { return pending_.load(std::memory_order_acquire) == 0; }
  // Waits until idle; returns (and clears) the first error since last time.
  std::exception_ptr wait_idle();
  // Drains the queue and stops the worker; errors not yet collected are
  // dropped.
  void shutdown();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable work_cv_;  // worker: a command or stop arrived
  std::condition_variable idle_cv_;  // waiters: pending_ reached 0
  std::deque<std::function<void()>> commands_;
  std::atomic<size_t> pending_{0};  // enqueued and not yet finished
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;
};

// How a CPU driver reaches its device memory. The host driver's addresses
// are host pointers (no translation); the protected driver maps each one to
// its own private view of the memory.
class HostMemoryAccess {
 public:
  virtual ~HostMemoryAccess() = default;
  // A pointer the driver itself may use for [addr, addr + bytes); throws
  // InvalidArgumentError when the range is not inside one allocation.
  virtual void* view(DeviceAddress addr, size_t bytes) const = 0;
};

class HostQueue : public Queue {
 public:
  // `access`: null for host memory. `dispatch_on_worker`: dispatches run on
  // the queue's thread, asynchronously, as a GPU's do, with their bindings
  // translated through `access`; otherwise (host memory only) on the
  // calling thread once the queue is idle, so a kernel uses the caller's
  // cores without a thread handoff.
  HostQueue(int device, int priority,
            std::shared_ptr<const HostMemoryAccess> access = nullptr,
            bool dispatch_on_worker = false);
  ~HostQueue() override;

  int device() const override { return device_; }
  int priority() const override { return priority_; }
  void copy_async(void* dst, const void* src, size_t bytes,
                  CopyKind kind) override;
  void fill(DeviceAddress dst, size_t bytes, uint64_t pattern,
            int pattern_size) override;
  void update(DeviceAddress dst, const void* src, size_t bytes) override;
  void dispatch(Executable& executable, int entry,
                std::span<const DeviceAddress> bindings,
                std::span<const int64_t> scalars, Grid grid) override;
  void host_task(std::function<void()> fn) override;
  void record(Event& event) override;
  void wait(const Event& event) override;
  bool query() const override { return core_->idle(); }
  void synchronize() override;

  const std::shared_ptr<HostQueueCore>& core() const { return core_; }

 private:
  void* view(DeviceAddress addr, size_t bytes) const {
    return access_ ? access_->view(addr, bytes) : addr;
  }

  int device_;
  int priority_;
  std::shared_ptr<const HostMemoryAccess> access_;
  bool dispatch_on_worker_;
  std::shared_ptr<HostQueueCore> core_;
};

// The copy of Queue::copy_async / Driver::copy in a CPU driver: device sides
// go through `access` (null: host pointers).
void host_copy(const HostMemoryAccess* access, void* dst, const void* src,
               size_t bytes, CopyKind kind);
// Fills `bytes` at `dst` with the low `pattern_size` bytes of `pattern`.
void fill_pattern(void* dst, size_t bytes, uint64_t pattern, int pattern_size);
// Throws InvalidArgumentError unless a fill of `bytes` with a
// `pattern_size`-byte pattern is well formed.
void check_fill(size_t bytes, int pattern_size);

}  // namespace openneuron::hal
