// The caching device allocator, modelled on CUDA's: memory is obtained from
// the driver in segments and handed out as blocks, which are split, cached on
// free, coalesced with free neighbours, and reused in stream order.
//
// - Sizes are rounded to 512 bytes. Requests up to 1 MiB come from the small
//   pool (2 MiB segments); larger ones from the large pool (20 MiB segments for
//   requests under 10 MiB, otherwise a segment rounded up to 2 MiB).
// - A free block is reused only by the queue that allocated it, unless that
//   queue has finished with it: record_stream() adds other queues, and a block
//   freed while other queues use it waits for their events before reuse.
// - When the driver runs out, the cache is released and the allocation tried
//   again (num_alloc_retries); if it still fails, OutOfMemoryError is thrown,
//   num_ooms counts it and the allocator stays consistent and usable.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "hal/allocator_stats.h"
#include "hal/driver.h"

namespace openneuron::hal {

// One block as seen by snapshot().
struct BlockSnapshot {
  uintptr_t address = 0;
  size_t size = 0;
  size_t requested_size = 0;
  bool allocated = false;
  bool active = false;  // allocated, or freed but still used by a queue
};

// One driver allocation as seen by snapshot().
struct SegmentSnapshot {
  int device = 0;
  uintptr_t address = 0;
  size_t total_size = 0;
  size_t allocated_size = 0;
  size_t active_size = 0;
  const Queue* queue = nullptr;
  bool is_large = false;
  std::vector<BlockSnapshot> blocks;
};

// One event of the allocator's history, as CUDA's allocator traces them
// (torch.neuron.memory._record_memory_history).
struct TraceEvent {
  enum class Action { Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, Oom };
  Action action = Action::Alloc;
  uintptr_t address = 0;
  size_t size = 0;  // a block's or segment's bytes; an OOM's request
  const Queue* queue = nullptr;
  size_t device_free = 0;  // Oom: bytes the device could still give
};
// Called with the allocator's lock held, on the thread whose call caused
// the event: it must not call into the allocator.
using TraceObserver = std::function<void(int device, const TraceEvent&)>;

class CachingAllocator {
 public:
  // `capacity` bounds the bytes reserved from the driver for this device.
  CachingAllocator(Driver& driver, int device, size_t capacity);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Returns device memory of at least `bytes` for use on `queue` (which may
  // be null for "no queue"). 0 bytes returns nullptr. Throws OutOfMemoryError.
  void* allocate(size_t bytes, const Queue* queue);
  // Returns a pointer from allocate(). Throws InvalidArgumentError for others.
  void free(void* ptr);
  // Marks `ptr` as used by `queue`: on free, reuse waits for that queue.
  void record_stream(void* ptr, Queue* queue);
  // True when `ptr` is a live allocation of this allocator.
  bool owns(void* ptr) const;
  // Size of the allocation holding `ptr` (0 if none).
  size_t allocation_size(void* ptr) const;

  // Called (without this allocator's lock) when a request fails even after
  // this allocator released its cache, before OutOfMemoryError: it may free
  // memory the device shares with others (their caches); the request is
  // then tried once more. Set once, before the allocator is used.
  void set_reclaim(std::function<void(int device)> reclaim);

  // Bounds this allocator's reserved memory to `fraction` (0..1) of its
  // capacity, as torch.cuda.set_per_process_memory_fraction: a request past
  // it raises OutOfMemoryError naming the fraction. Throws
  // InvalidArgumentError outside 0..1.
  void set_memory_fraction(double fraction);
  double memory_fraction() const;
  size_t memory_limit() const;  // capacity() times the fraction

  // Observes every later event (an empty function stops it).
  void set_trace_observer(TraceObserver observer);

  // Releases every unused cached segment to the driver.
  void empty_cache();
  AllocatorStats stats() const;
  void reset_peak_stats();
  void reset_accumulated_stats();
  std::vector<SegmentSnapshot> snapshot() const;

  int device() const { return device_; }
  size_t capacity() const { return capacity_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::function<void(int)> reclaim_;
  int device_;
  size_t capacity_;
};

}  // namespace openneuron::hal

namespace openneuron::hal {

// The process-wide allocator of `device`, created on first use with the
// device's capacity. Throws InvalidDeviceError for a bad index.
CachingAllocator& device_allocator(int device);

}  // namespace openneuron::hal
