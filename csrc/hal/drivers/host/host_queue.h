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

class HostQueue : public Queue {
 public:
  HostQueue(int device, int priority);
  ~HostQueue() override;

  int device() const override { return device_; }
  int priority() const override { return priority_; }
  void copy_async(void* dst, const void* src, size_t bytes,
                  CopyKind kind) override;
  void host_task(std::function<void()> fn) override;
  void record(Event& event) override;
  void wait(const Event& event) override;
  bool query() const override { return core_->idle(); }
  void synchronize() override;

  const std::shared_ptr<HostQueueCore>& core() const { return core_; }

 private:
  int device_;
  int priority_;
  std::shared_ptr<HostQueueCore> core_;
};

}  // namespace openneuron::hal
