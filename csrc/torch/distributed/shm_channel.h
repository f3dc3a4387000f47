// A shared-memory segment joining the ranks of one group on one machine:
// per-rank data slots (two sets, used alternately) and per-rank progress
// counters. Collectives between processes of one host move through it with
// plain memory copies instead of TCP loopback (two copies through the kernel
// plus syscalls). No PyTorch here: collectives are built on it elsewhere.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace openneuron::integration {

// A peer that did not reach a barrier in time, or died.
class ShmPeerError : public std::runtime_error {
 public:
  ShmPeerError(const std::string& what, std::vector<int> missing)
      : std::runtime_error(what), missing_ranks(std::move(missing)) {}
  std::vector<int> missing_ranks;
};

class ShmChannel {
 public:
  // Rank 0 creates the segment under `name` (e.g. "/openneuron-..."), the
  // others open it. Both throw std::runtime_error saying why they could not.
  static ShmChannel* create(const std::string& name, int rank, int size,
                            size_t slot_bytes);
  static ShmChannel* open(const std::string& name, int rank, int size,
                          size_t slot_bytes);
  // Removes the name (the mapping lives on until every rank unmapped it).
  static void unlink(const std::string& name);
  ~ShmChannel();

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }
  // The slot of `rank` in the set the current step uses.
  char* slot(int rank) const;
  // Moves to the other slot set (once per chunk of a collective).
  void next_set() { set_ ^= 1; }

  // Peers share our pid namespace: a dead peer is noticed at once, not at
  // the timeout.
  void set_check_pids(bool enabled) { check_pids_ = enabled; }
  // Publishes that this rank reached the next barrier and waits until every
  // rank did. Throws ShmPeerError naming the ranks that did not arrive
  // before `timeout`, or that died; the channel is then broken for good.
  void barrier(std::chrono::milliseconds timeout);
  bool broken() const { return broken_; }
  // Makes every barrier (now waiting or later) fail at once (group abort).
  void abort();

 private:
  struct alignas(64) Peer {
    std::atomic<uint64_t> step;
    std::atomic<int64_t> pid;
  };

  ShmChannel(void* base, size_t bytes, int rank, int size, size_t slot_bytes);
  static size_t segment_bytes(int size, size_t slot_bytes);
  Peer* peer(int rank) const;
  // Bumped at every arrival: waiters sleep on it (a futex shared between
  // the processes) instead of spinning on cores their peers need.
  std::atomic<uint32_t>* arrivals() const;
  std::vector<int> behind(uint64_t step) const;
  std::vector<int> dead(const std::vector<int>& ranks) const;

  void* base_;
  size_t bytes_;
  int rank_;
  int size_;
  size_t slot_bytes_;
  int set_ = 0;
  uint64_t step_ = 0;
  bool check_pids_ = false;
  bool oversubscribed_ = false;  // more ranks than cores: do not spin
  std::atomic<bool> aborted_{false};
  bool broken_ = false;
};

}  // namespace openneuron::integration
