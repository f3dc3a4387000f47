#include "torch/aten/eager/background_builds.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace openneuron::integration {
namespace {

struct Builds {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queued;
  int64_t pending = 0;  // queued or running
  bool worker_started = false;
  bool exiting = false;
};

Builds& builds() {
  static auto* b = new Builds();  // leaked: the worker may outlive static destruction order
  return *b;
}

void work() {
  // The lowest priority (this thread's, and the compiler processes' it
  // starts): the user's computation keeps the cores; a build takes what
  // it leaves. (Linux: a thread's nice value is its own.)
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  Builds& b = builds();
  std::unique_lock<std::mutex> lock(b.mutex);
  while (true) {
    b.changed.wait(lock, [&] { return b.exiting || !b.queued.empty(); });
    if (b.exiting) return;
    std::function<void()> build = std::move(b.queued.front());
    b.queued.pop_front();
    lock.unlock();
    build();
    build = nullptr;
    lock.lock();
    --b.pending;
    b.changed.notify_all();
  }
}

}  // namespace

void stop_background_builds() {
  Builds& b = builds();
  std::unique_lock<std::mutex> lock(b.mutex);
  b.exiting = true;
  b.pending -= static_cast<int64_t>(b.queued.size());
  b.queued.clear();
  b.changed.notify_all();
  b.changed.wait(lock, [&] { return b.pending == 0; });
}

namespace {

// A forked child has no worker and must not inherit a held lock: it starts
// afresh (chains whose kernels were building in the parent run unfused).
void reset_in_child() {
  new (&builds()) Builds();
}

}  // namespace

void build_in_background(std::function<void()> build) {
  Builds& b = builds();
  std::lock_guard<std::mutex> lock(b.mutex);
  if (b.exiting) return;
  if (!b.worker_started) {
    b.worker_started = true;
    static bool fork_handler = (pthread_atfork(nullptr, nullptr, reset_in_child), true);
    (void)fork_handler;
    std::thread(work).detach();
  }
  b.queued.push_back(std::move(build));
  ++b.pending;
  b.changed.notify_all();
}

int64_t background_builds_pending() {
  Builds& b = builds();
  std::lock_guard<std::mutex> lock(b.mutex);
  return b.pending;
}

void wait_for_background_builds() {
  Builds& b = builds();
  std::unique_lock<std::mutex> lock(b.mutex);
  b.changed.wait(lock, [&] { return b.pending == 0; });
}

}  // namespace openneuron::integration
