#include "torch/distributed/shm_channel.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

namespace openneuron::integration {
namespace {

constexpr size_t kHeaderAlign = 4096;

std::string errno_text(const char* what, const std::string& name) {
  return std::string(what) + " " + name + ": " + std::strerror(errno);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX,
          nullptr, nullptr, 0);
}

// Sleeps while *word == seen, at most `limit`.
void futex_wait(std::atomic<uint32_t>* word, uint32_t seen,
                std::chrono::microseconds limit) {
  timespec ts{static_cast<time_t>(limit.count() / 1000000),
              static_cast<long>(limit.count() % 1000000) * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts,
          nullptr, 0);
}

std::string join(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i)
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

void* map_segment(int fd, size_t bytes, const std::string& name) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) throw std::runtime_error(errno_text("mmap", name));
  return base;
}

}  // namespace

size_t ShmChannel::segment_bytes(int size, size_t slot_bytes) {
  const size_t header = (sizeof(Peer) * (size + 1) + kHeaderAlign - 1) /
                        kHeaderAlign * kHeaderAlign;
  return header + 2 * static_cast<size_t>(size) * slot_bytes;
}

ShmChannel* ShmChannel::create(const std::string& name, int rank, int size,
                               size_t slot_bytes) {
  const size_t bytes = segment_bytes(size, slot_bytes);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error(errno_text("shm_open", name));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string error = errno_text("ftruncate", name);
    close(fd);
    shm_unlink(name.c_str());
    throw std::runtime_error(error);
  }
  void* base = map_segment(fd, bytes, name);
  for (int r = 0; r < size; ++r) {
    auto* p = new (static_cast<Peer*>(base) + r) Peer;
    p->step.store(0);
    p->pid.store(0);
  }
  new (static_cast<Peer*>(base) + size) std::atomic<uint32_t>(0);
  return new ShmChannel(base, bytes, rank, size, slot_bytes);
}

ShmChannel* ShmChannel::open(const std::string& name, int rank, int size,
                             size_t slot_bytes) {
  const size_t bytes = segment_bytes(size, slot_bytes);
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw std::runtime_error(errno_text("shm_open", name));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    throw std::runtime_error("shared memory " + name +
                             " has an unexpected size");
  }
  return new ShmChannel(map_segment(fd, bytes, name), bytes, rank, size,
                        slot_bytes);
}

void ShmChannel::unlink(const std::string& name) { shm_unlink(name.c_str()); }

ShmChannel::ShmChannel(void* base, size_t bytes, int rank, int size,
                       size_t slot_bytes)
    : base_(base),
      bytes_(bytes),
      rank_(rank),
      size_(size),
      slot_bytes_(slot_bytes) {
  peer(rank)->pid.store(getpid());
  cpu_set_t cpus;
  const int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0
                        ? CPU_COUNT(&cpus)
                        : static_cast<int>(std::thread::hardware_concurrency());
  oversubscribed_ = size > cores;
}

ShmChannel::~ShmChannel() { munmap(base_, bytes_); }

ShmChannel::Peer* ShmChannel::peer(int rank) const {
  return static_cast<Peer*>(base_) + rank;
}

std::atomic<uint32_t>* ShmChannel::arrivals() const {
  return reinterpret_cast<std::atomic<uint32_t>*>(static_cast<Peer*>(base_) +
                                                  size_);
}

char* ShmChannel::slot(int rank) const {
  const size_t header = segment_bytes(size_, 0);
  return static_cast<char*>(base_) + header +
         (static_cast<size_t>(set_) * size_ + rank) * slot_bytes_;
}

std::vector<int> ShmChannel::behind(uint64_t step) const {
  std::vector<int> out;
  for (int r = 0; r < size_; ++r)
    if (peer(r)->step.load(std::memory_order_acquire) < step) out.push_back(r);
  return out;
}

// Gone, or a zombie its parent has not reaped yet.
static bool process_dead(int64_t pid) {
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  char path[64], line[512] = {};
  std::snprintf(path, sizeof(path), "/proc/%lld/stat", static_cast<long long>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  const bool read = std::fgets(line, sizeof(line), f) != nullptr;
  std::fclose(f);
  const char* name_end = read ? std::strrchr(line, ')') : nullptr;  // "pid (name) S ..."
  return name_end && name_end[1] == ' ' && name_end[2] == 'Z';
}

std::vector<int> ShmChannel::dead(const std::vector<int>& ranks) const {
  std::vector<int> out;
  for (int r : ranks) {
    const int64_t pid = peer(r)->pid.load(std::memory_order_relaxed);
    if (pid > 0 && process_dead(pid)) out.push_back(r);
  }
  return out;
}

void ShmChannel::abort() {
  aborted_.store(true);
  futex_wake_all(arrivals());
}

void ShmChannel::barrier(std::chrono::milliseconds timeout) {
  if (broken_)
    throw ShmPeerError("the group's shared-memory channel failed earlier", {});
  if (aborted_.load()) {
    broken_ = true;
    throw ShmPeerError("the group was aborted", {});
  }
  const uint64_t step = ++step_;
  peer(rank_)->step.store(step, std::memory_order_release);
  arrivals()->fetch_add(1, std::memory_order_release);
  futex_wake_all(arrivals());
  // Spin briefly when every rank has a core (peers usually arrive within
  // microseconds), else sleep on the arrivals futex; look for dead peers
  // and the deadline every few milliseconds.
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto next_check = start + std::chrono::milliseconds(5);
  const uint64_t spin_limit = oversubscribed_ ? 0 : 2048;
  for (uint64_t spins = 0;; ++spins) {
    const uint32_t seen = arrivals()->load(std::memory_order_acquire);
    bool all = true;
    for (int r = 0; r < size_ && all; ++r)
      all = peer(r)->step.load(std::memory_order_acquire) >= step;
    if (all) return;
    if (spins < spin_limit) continue;
    futex_wait(arrivals(), seen, std::chrono::milliseconds(5));
    if (aborted_.load()) {
      broken_ = true;
      throw ShmPeerError("the group was aborted", behind(step));
    }
    const auto now = clock::now();
    if (now < next_check) continue;
    next_check = now + std::chrono::milliseconds(5);
    const auto missing = behind(step);
    const auto gone = check_pids_ ? dead(missing) : std::vector<int>{};
    if (!gone.empty() || now - start > timeout) {
      broken_ = true;
      throw ShmPeerError(
          gone.empty() ? "timed out after " + std::to_string(timeout.count()) +
                             " ms waiting for ranks " + join(missing)
                       : "ranks " + join(gone) + " died",
          missing);
    }
  }
}

}  // namespace openneuron::integration
