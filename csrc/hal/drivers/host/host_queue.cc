#include "hal/drivers/host/host_queue.h"

#include <cstring>
#include <string>
#include <utility>

#include "hal/drivers/host/host_event.h"
#include "hal/error.h"

namespace openneuron::hal {

HostQueueCore::~HostQueueCore() { shutdown(); }

void HostQueueCore::enqueue(std::function<void()> command) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) throw Error("enqueue on a destroyed OpenNeuron host queue");
    if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    commands_.push_back(std::move(command));
    pending_.fetch_add(1, std::memory_order_acq_rel);
  }
  work_cv_.notify_one();
}

std::exception_ptr HostQueueCore::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [this] { return pending_.load() == 0; });
  return std::exchange(error_, nullptr);
}

void HostQueueCore::shutdown() {
  std::thread worker;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_cv_.wait(lock, [this] { return pending_.load() == 0; });
    stop_ = true;
    worker = std::move(worker_);
  }
  work_cv_.notify_all();
  if (worker.joinable()) worker.join();
}

void HostQueueCore::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || !commands_.empty(); });
    if (commands_.empty()) return;  // stop_ and drained
    std::function<void()> command = std::move(commands_.front());
    commands_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      command();
    } catch (...) {
      error = std::current_exception();
    }
    command = nullptr;  // release captures before the queue reports idle
    lock.lock();
    if (error && !error_) error_ = error;
    // Decremented only after the command finished, so idle() is exact.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      idle_cv_.notify_all();
    }
  }
}

HostQueue::HostQueue(int device, int priority)
    : device_(device),
      priority_(priority),
      core_(std::make_shared<HostQueueCore>()) {}

HostQueue::~HostQueue() { core_->shutdown(); }

void HostQueue::copy_async(void* dst, const void* src, size_t bytes,
                           CopyKind /*kind*/) {
  if (bytes == 0) return;
  // Device memory is ordinary RAM, so every direction is a memcpy.
  core_->enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

void HostQueue::host_task(std::function<void()> fn) {
  if (!fn) throw InvalidArgumentError("host_task: empty function");
  core_->enqueue(std::move(fn));
}

void HostQueue::record(Event& event) {
  auto* host_event = dynamic_cast<HostEvent*>(&event);
  if (host_event == nullptr) {
    throw InvalidArgumentError(
        "record: the event was not created by the host driver");
  }
  if (host_event->device() != device_) {
    throw InvalidArgumentError(
        "record: event of device " + std::to_string(host_event->device()) +
        " recorded on a queue of device " + std::to_string(device_));
  }
  // The marker holds the shared state, not the event, which may be
  // destroyed before the marker runs.
  std::shared_ptr<HostEventState> state = host_event->state();
  uint64_t seq = state->begin_record();
  core_->enqueue([state, seq] { state->complete(seq); });
}

void HostQueue::wait(const Event& event) {
  const auto* host_event = dynamic_cast<const HostEvent*>(&event);
  if (host_event == nullptr) {
    throw InvalidArgumentError(
        "wait: the event was not created by the host driver");
  }
  std::shared_ptr<HostEventState> state = host_event->state();
  // Waits for the record current now, as CUDA does; later re-records of the
  // event do not affect this wait. A never-recorded event is complete.
  uint64_t seq = state->latest();
  if (seq == 0 || state->reached(seq)) return;
  core_->enqueue([state, seq] { state->wait(seq); });
}

void HostQueue::synchronize() {
  if (std::exception_ptr error = core_->wait_idle()) {
    std::rethrow_exception(error);
  }
}

}  // namespace openneuron::hal
