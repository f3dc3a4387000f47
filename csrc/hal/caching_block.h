// Internal to the caching allocator: blocks, the pools that cache free ones,
// and the size policy (which pool, how big a segment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>

#include "hal/allocator_stats.h"
#include "hal/queue.h"

namespace openneuron::hal {

constexpr size_t kMinBlockSize = 512;           // every size is rounded to this
constexpr size_t kSmallSize = size_t{1} << 20;  // largest small-pool request
constexpr size_t kSmallBuffer = size_t{2} << 20;     // small-pool segment size
constexpr size_t kLargeBuffer = size_t{20} << 20;    // segment for mid requests
constexpr size_t kMinLargeAlloc = size_t{10} << 20;  // from here: own segment
constexpr size_t kRoundLarge = size_t{2} << 20;  // own segments round to this
// Freed blocks up to this size are parked for reuse by the next request of
// the same size (see CachingAllocator::Impl::park), at most kParkedPerSize
// of each size.
constexpr size_t kMaxParkedSize = size_t{8} << 10;
constexpr size_t kParkedPerSize = 4;

inline size_t round_up(size_t size, size_t multiple) {
  return (size + multiple - 1) / multiple * multiple;
}

inline size_t round_size(size_t size) {
  return size < kMinBlockSize ? kMinBlockSize : round_up(size, kMinBlockSize);
}

// Bytes to ask the driver for when no cached block fits `size`.
inline size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return round_up(size, kRoundLarge);
}

struct BlockPool;

// A piece of a segment. The blocks of one segment form a doubly linked list
// in address order; the first block object stays the segment's head for the
// segment's whole life (splits add blocks after it, merges keep the lower).
struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  size_t requested_size = 0;     // unrounded request while allocated
  const Queue* queue = nullptr;  // the queue of the segment
  BlockPool* pool = nullptr;
  bool allocated = false;
  bool parked = false;           // freed, waiting in a parking list
  int event_count = 0;           // outstanding events of a deferred free
  std::set<Queue*> stream_uses;  // extra queues from record_stream
  Block* prev = nullptr;
  Block* next = nullptr;

  bool is_split() const { return prev != nullptr || next != nullptr; }
  // Free and in its pool: may merge with a neighbour being freed.
  bool mergeable() const { return !active() && !parked; }
  // In use by a client or by a queue that has not finished with it.
  bool active() const { return allocated || event_count > 0; }
};

// Best fit for a queue = the first block not less than (queue, size, 0).
struct BlockComparator {
  bool operator()(const Block* a, const Block* b) const {
    auto qa = reinterpret_cast<uintptr_t>(a->queue);
    auto qb = reinterpret_cast<uintptr_t>(b->queue);
    if (qa != qb) return qa < qb;
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) <
           reinterpret_cast<uintptr_t>(b->ptr);
  }
};

// The free, reusable blocks of one size class.
struct BlockPool {
  explicit BlockPool(bool small) : is_small(small) {}
  std::set<Block*, BlockComparator> blocks;
  const bool is_small;
  Pool stat_pool() const { return is_small ? Pool::Small : Pool::Large; }
};

}  // namespace openneuron::hal
