#include "hal/drivers/host/host_queue.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "hal/drivers/host/host_event.h"
#include "hal/drivers/host/host_executable.h"
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
    if (commands_.empty() && !stop_) {
      // Eager ops arrive microseconds apart: look again for a short while,
      // yielding the core, before sleeping (a futex sleep and wake per
      // command cost more than a small kernel).
      lock.unlock();
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (pending_.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      lock.lock();
    }
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

void host_copy(const HostMemoryAccess* access, void* dst, const void* src,
               size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  if (access) {
    if (kind != CopyKind::HostToDevice) src = access->view(const_cast<void*>(src), bytes);
    if (kind != CopyKind::DeviceToHost) dst = access->view(dst, bytes);
  }
  std::memcpy(dst, src, bytes);
}

void check_fill(size_t bytes, int pattern_size) {
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8)
    throw InvalidArgumentError("fill: pattern size must be 1, 2, 4 or 8 bytes, got " +
                               std::to_string(pattern_size));
  if (bytes % pattern_size != 0)
    throw InvalidArgumentError("fill: " + std::to_string(bytes) +
                               " bytes is not a multiple of the " +
                               std::to_string(pattern_size) + "-byte pattern");
}

void fill_pattern(void* dst, size_t bytes, uint64_t pattern, int pattern_size) {
  auto* out = static_cast<unsigned char*>(dst);
  if (pattern_size == 1) {
    std::memset(out, static_cast<int>(pattern & 0xff), bytes);
    return;
  }
  // Little-endian: the pattern's low bytes come first in memory.
  unsigned char unit[8];
  std::memcpy(unit, &pattern, 8);
  const size_t first = std::min<size_t>(bytes, 64);
  for (size_t i = 0; i < first; ++i) out[i] = unit[i % pattern_size];
  // Double the filled prefix (64 is a multiple of every pattern size).
  for (size_t done = first; done < bytes;) {
    const size_t n = std::min(done, bytes - done);
    std::memcpy(out + done, out, n);
    done += n;
  }
}

HostQueue::HostQueue(int device, int priority,
                     std::shared_ptr<const HostMemoryAccess> access,
                     bool dispatch_on_worker)
    : device_(device),
      priority_(priority),
      access_(std::move(access)),
      dispatch_on_worker_(dispatch_on_worker),
      core_(std::make_shared<HostQueueCore>()) {}

HostQueue::~HostQueue() { core_->shutdown(); }

void HostQueue::copy_async(void* dst, const void* src, size_t bytes,
                           CopyKind kind) {
  if (bytes == 0) return;
  // Device sides are translated now, so a bad address throws at the call.
  if (kind != CopyKind::HostToDevice) src = view(const_cast<void*>(src), bytes);
  if (kind != CopyKind::DeviceToHost) dst = view(dst, bytes);
  core_->enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

void HostQueue::fill(DeviceAddress dst, size_t bytes, uint64_t pattern,
                     int pattern_size) {
  check_fill(bytes, pattern_size);
  if (bytes == 0) return;
  void* out = view(dst, bytes);
  core_->enqueue([=] { fill_pattern(out, bytes, pattern, pattern_size); });
}

void HostQueue::update(DeviceAddress dst, const void* src, size_t bytes) {
  if (bytes > kMaxUpdateBytes)
    throw InvalidArgumentError("update: " + std::to_string(bytes) + " bytes exceeds the " +
                               std::to_string(kMaxUpdateBytes) +
                               "-byte limit; use copy_async");
  if (bytes == 0) return;
  void* out = view(dst, bytes);
  const auto* in = static_cast<const unsigned char*>(src);
  core_->enqueue([out, data = std::vector<unsigned char>(in, in + bytes)] {
    std::memcpy(out, data.data(), data.size());
  });
}

void HostQueue::dispatch(Executable& executable, int entry,
                         std::span<const DeviceAddress> bindings,
                         std::span<const int64_t> scalars, Grid grid) {
  const HostExecutable& exe =
      checked_host_executable(executable, device_, entry, bindings.size(), scalars.size());
  const HostExecutable::EntryFn fn = exe.function(entry);
  const int64_t threads = grid.x;
  if (!dispatch_on_worker_) {
    // The host driver: host pointers, run on the caller once the queue is idle.
    if (!core_->idle()) synchronize();
    fn(const_cast<void**>(bindings.data()), scalars.data(), threads);
    return;
  }
  // Translated now, so a bad address throws at the call; run in queue order.
  std::vector<void*> views(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i)
    views[i] = bindings[i] ? view(bindings[i], 1) : nullptr;
  core_->enqueue([fn, threads, views = std::move(views),
                  values = std::vector<int64_t>(scalars.begin(), scalars.end())]() mutable {
    fn(views.data(), values.data(), threads);
  });
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
