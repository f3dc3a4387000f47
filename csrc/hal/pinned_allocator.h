// Page-locked ("pinned") host memory for fast and asynchronous transfers.
// Like CUDA's caching host allocator: blocks are cached by size (powers of
// two), and a block used by an asynchronous copy is not handed out again
// until the events recorded for those copies have completed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "hal/queue.h"

namespace openneuron::hal {

struct PinnedStats {
  int64_t allocated_bytes = 0;  // bytes in blocks handed out now
  int64_t reserved_bytes = 0;   // bytes held, in use or cached
  int64_t num_host_alloc = 0;   // fresh host allocations made
  int64_t num_host_free = 0;    // host allocations released
};

class PinnedAllocator {
 public:
  PinnedAllocator();
  ~PinnedAllocator();
  // Returns page-locked memory (locked when the OS permits; otherwise plain
  // page-aligned memory). 0 bytes returns nullptr.
  void* allocate(size_t bytes);
  void free(void* ptr);
  // `ptr` (anywhere inside a pinned block) is used by work now enqueued on
  // `queue`; the block is reused only after that work completed.
  void record_use(const void* ptr, Queue& queue);
  // True when `ptr` points inside a live pinned block.
  bool is_pinned(const void* ptr) const;
  // The live block holding all of [ptr, ptr + bytes): its start and size;
  // false when there is none. For drivers that map pinned blocks into a
  // device's view (imported host memory).
  bool find_block(const void* ptr, size_t bytes, uintptr_t* start, size_t* size) const;
  // `fn(start, size)` runs before a block's memory goes back to the OS (no
  // work uses it any more), with the allocator's lock held: it must not call
  // into the allocator. Returns an id for remove_release_listener.
  int add_release_listener(std::function<void(uintptr_t, size_t)> fn);
  void remove_release_listener(int id);
  void empty_cache();
  PinnedStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process-wide pinned allocator.
PinnedAllocator& pinned_allocator();

}  // namespace openneuron::hal
