#include "hal/caching_allocator.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <string>
#include <utility>

#include "hal/caching_block.h"
#include "hal/error.h"

namespace openneuron::hal {
namespace {

// Requests above this would overflow the rounding; no device holds them.
constexpr size_t kMaxRequest = std::numeric_limits<size_t>::max() / 2;

std::string pointer_string(const void* ptr) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", ptr);
  return buf;
}

}  // namespace

struct CachingAllocator::Impl {
  struct Segment {
    Block* head;
    size_t size;
  };
  // A free deferred until `event` (recorded on a queue using the block)
  // completes.
  struct PendingFree {
    std::unique_ptr<Event> event;
    Block* block;
  };

  Impl(Driver& d, int dev, size_t cap)
      : driver(d), device(dev), capacity(cap), limit(cap),
        max_allocation(d.properties(dev).max_allocation) {
    // CUDA reports "no max_split_size" as SIZE_MAX cast to int64.
    stats.max_split_size = -1;
  }
  ~Impl();

  // nullptr on failure unless `last_try` (then OutOfMemoryError).
  void* malloc(size_t orig_size, const Queue* queue, bool last_try);
  void free(void* ptr);
  void record_stream(void* ptr, Queue* queue);
  Block* find_active(const void* ptr) const;

  Block* get_free_block(BlockPool& pool, const Queue* queue, size_t size);
  Block* alloc_segment(BlockPool& pool, const Queue* queue, size_t size);
  Block* map_segment(BlockPool& pool, const Queue* queue, size_t bytes);
  Block* use_block(Block* block, size_t size, size_t orig_size);
  void mark_allocated(Block* block, size_t orig_size);
  void free_block(Block* block);
  void return_to_pool(Block* block);
  bool park(Block* block);
  Block* take_parked(const Queue* queue, size_t size);
  void unpark_all();
  void deactivate(Block* block);
  void insert_events(Block* block);
  void process_events();
  void synchronize_and_free_events();
  void release_cached_blocks();
  void release_segment(Block* head);
  std::string limit_description(size_t request) const;
  void set_fraction(double value);
  void trace(TraceEvent::Action action, const void* ptr, size_t size, const Queue* queue) {
    if (observer) observer(device, TraceEvent{action, reinterpret_cast<uintptr_t>(ptr), size, queue, 0});
  }
  void trace_oom(size_t request) {
    if (observer) observer(device, TraceEvent{TraceEvent::Action::Oom, 0, request, nullptr,
                                              driver.memory_budget(device).free});
  }

  BlockPool& pool_for(size_t size) {
    return size <= kSmallSize ? small_pool : large_pool;
  }

  Driver& driver;
  const int device;
  const size_t capacity;
  size_t limit;             // capacity times the per-process memory fraction
  const size_t max_allocation;  // the driver's largest allocate() (0: no limit)
  double fraction = 1.0;
  mutable std::mutex mutex;
  AllocatorStats stats;
  BlockPool small_pool{true};
  BlockPool large_pool{false};
  // Allocated blocks by address: looked up on every free.
  std::unordered_map<uintptr_t, Block*> active_blocks;
  std::map<uintptr_t, Segment> segments;      // every segment, by address
  std::vector<PendingFree> pending_frees;
  // Parking lists: freed small blocks by size (index size / kMinBlockSize),
  // not yet merged back into their pool. A loop that frees and allocates
  // the same small size (every eager op) then skips the split and merge.
  std::array<std::vector<Block*>, kMaxParkedSize / kMinBlockSize + 1> parked;
  size_t parked_count = 0;
  TraceObserver observer;
};

CachingAllocator::Impl::~Impl() {
  // Queues may still read or write deferred blocks; wait for them.
  for (auto& pending : pending_frees) pending.event->synchronize();
  for (auto& [address, segment] : segments) {
    for (Block* b = segment.head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
    try {
      driver.free(device, reinterpret_cast<void*>(address), segment.size);
    } catch (...) {
      // Nothing useful to do in a destructor.
    }
  }
}

void* CachingAllocator::Impl::malloc(size_t orig_size, const Queue* queue,
                                     bool last_try) {
  process_events();
  if (max_allocation != 0 && max_allocation < capacity && orig_size > max_allocation) {
    // No segment can hold it: fail now, without emptying the cache. (A
    // request past the whole capacity is told about the capacity below.)
    ++stats.num_ooms;
    trace_oom(orig_size);
    const auto all = static_cast<size_t>(Pool::All);
    throw OutOfMemoryError(device, orig_size, limit,
                           static_cast<size_t>(stats.allocated_bytes[all].current),
                           static_cast<size_t>(stats.reserved_bytes[all].current),
                           "one allocation on a " + driver.name() + " device holds at most " +
                               format_bytes(max_allocation) + " (the driver's max_allocation)");
  }
  Block* block = nullptr;
  size_t size = 0;
  if (orig_size <= kMaxRequest) {
    size = round_size(orig_size);
    if (Block* reused = take_parked(queue, size)) {
      mark_allocated(reused, orig_size);
      return reused->ptr;
    }
    // Any other request sees every free block, parked ones merged back, so
    // the choice stays best fit.
    unpark_all();
    BlockPool& pool = pool_for(size);
    block = get_free_block(pool, queue, size);
    if (block == nullptr) block = alloc_segment(pool, queue, size);
    if (block == nullptr) {
      // Give the whole cache back and try once more: the room may be held
      // by cached segments, or by blocks whose queues are still running.
      release_cached_blocks();
      ++stats.num_alloc_retries;
      block = get_free_block(pool, queue, size);
      if (block == nullptr) block = alloc_segment(pool, queue, size);
    }
  }
  if (block == nullptr) {
    if (!last_try) return nullptr;
    ++stats.num_ooms;
    trace_oom(orig_size);
    const auto all = static_cast<size_t>(Pool::All);
    throw OutOfMemoryError(
        device, orig_size, limit,
        static_cast<size_t>(stats.allocated_bytes[all].current),
        static_cast<size_t>(stats.reserved_bytes[all].current),
        limit_description(orig_size));
  }
  return use_block(block, size, orig_size)->ptr;
}

Block* CachingAllocator::Impl::get_free_block(BlockPool& pool,
                                              const Queue* queue, size_t size) {
  Block key;
  key.queue = queue;
  key.size = size;
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->queue != queue) return nullptr;
  Block* block = *it;
  pool.blocks.erase(it);
  return block;
}

Block* CachingAllocator::Impl::alloc_segment(BlockPool& pool,
                                             const Queue* queue, size_t size) {
  size_t preferred = segment_size(size);
  if (max_allocation != 0 && preferred > max_allocation) preferred = std::max(size, max_allocation);
  Block* block = map_segment(pool, queue, preferred);
  // Near the capacity, a mid-size request may still fit in a segment of its
  // own size where the 20 MiB segment does not.
  const size_t minimal = round_up(size, kRoundLarge);
  if (block == nullptr && !pool.is_small && minimal < preferred) {
    block = map_segment(pool, queue, minimal);
  }
  return block;
}

// What bounded a failed request: this allocator's own limit when the request
// does not fit under it, else the driver's budget.
std::string CachingAllocator::Impl::limit_description(size_t request) const {
  const auto reserved = static_cast<size_t>(
      stats.reserved_bytes[static_cast<size_t>(Pool::All)].current);
  const MemoryBudget budget = driver.memory_budget(device);
  if (limit < budget.total && (request > limit || reserved > limit - request)) {
    if (fraction < 1.0) {
      char text[32];
      std::snprintf(text, sizeof(text), "%g", fraction);
      return "this process may use " + format_bytes(limit) + " of device " +
             std::to_string(device) +
             " (torch.neuron.set_per_process_memory_fraction(" + text + "))";
    }
    return "the device's allocator holds at most " + format_bytes(limit);
  }
  return budget.description + ", " + format_bytes(budget.free) + " of it free";
}

void CachingAllocator::Impl::set_fraction(double value) {
  fraction = value;
  limit = static_cast<size_t>(static_cast<long double>(capacity) * value);
}

// Obtains a new segment from the driver, within the limit.
Block* CachingAllocator::Impl::map_segment(BlockPool& pool, const Queue* queue,
                                           size_t bytes) {
  const auto reserved = static_cast<size_t>(
      stats.reserved_bytes[static_cast<size_t>(Pool::All)].current);
  if (bytes > limit || reserved > limit - bytes) return nullptr;
  void* ptr = driver.allocate(device, bytes);
  if (ptr == nullptr) return nullptr;
  auto* block = new Block;
  block->ptr = static_cast<char*>(ptr);
  block->size = bytes;
  block->queue = queue;
  block->pool = &pool;
  segments.emplace(reinterpret_cast<uintptr_t>(ptr), Segment{block, bytes});
  trace(TraceEvent::Action::SegmentAlloc, ptr, bytes, queue);
  update_stat(stats.segment, pool.stat_pool(), 1);
  update_stat(stats.reserved_bytes, pool.stat_pool(),
              static_cast<int64_t>(bytes));
  ++stats.num_device_alloc;
  return block;
}

// Hands out `block` (not in any pool), splitting off the unused tail when it
// is worth keeping.
Block* CachingAllocator::Impl::use_block(Block* block, size_t size,
                                         size_t orig_size) {
  BlockPool& pool = *block->pool;
  const Pool kind = pool.stat_pool();
  const bool already_split = block->is_split();
  const size_t remaining = block->size - size;
  const bool split =
      pool.is_small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) {
    auto* rest = new Block;
    rest->ptr = block->ptr + size;
    rest->size = remaining;
    rest->queue = block->queue;
    rest->pool = &pool;
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) rest->next->prev = rest;
    block->next = rest;
    block->size = size;
    pool.blocks.insert(rest);
    if (already_split) {
      // An inactive split block shrank by `size`.
      update_stat(stats.inactive_split_bytes, kind,
                  -static_cast<int64_t>(size));
    } else {
      // A whole segment became split: its tail is a new inactive split block.
      update_stat(stats.inactive_split, kind, 1);
      update_stat(stats.inactive_split_bytes, kind,
                  static_cast<int64_t>(remaining));
    }
  } else if (already_split) {
    // An inactive split block became active whole.
    update_stat(stats.inactive_split, kind, -1);
    update_stat(stats.inactive_split_bytes, kind,
                -static_cast<int64_t>(block->size));
  }
  mark_allocated(block, orig_size);
  return block;
}

// A block handed to a client: allocated and active.
void CachingAllocator::Impl::mark_allocated(Block* block, size_t orig_size) {
  const Pool kind = block->pool->stat_pool();
  block->allocated = true;
  block->requested_size = orig_size;
  trace(TraceEvent::Action::Alloc, block->ptr, block->size, block->queue);
  active_blocks.emplace(reinterpret_cast<uintptr_t>(block->ptr), block);
  const auto bytes = static_cast<int64_t>(block->size);
  update_stat(stats.allocation, kind, 1);
  update_stat(stats.allocated_bytes, kind, bytes);
  update_stat(stats.active, kind, 1);
  update_stat(stats.active_bytes, kind, bytes);
  update_stat(stats.requested_bytes, kind, static_cast<int64_t>(orig_size));
}

// Parks a freed small block (no longer active) instead of merging it, so
// the next request of its size and queue takes it back at once. Parked
// blocks are invisible in the statistics and snapshots, which unpark first:
// those read exactly as if every free had merged at once, as CUDA's do.
bool CachingAllocator::Impl::park(Block* block) {
  if (!block->pool->is_small || block->size > kMaxParkedSize) return false;
  auto& list = parked[block->size / kMinBlockSize];
  if (list.size() >= kParkedPerSize) return false;
  block->parked = true;
  block->requested_size = 0;
  list.push_back(block);
  ++parked_count;
  deactivate(block);
  return true;
}

Block* CachingAllocator::Impl::take_parked(const Queue* queue, size_t size) {
  if (parked_count == 0 || size > kMaxParkedSize) return nullptr;
  auto& list = parked[size / kMinBlockSize];
  for (size_t i = list.size(); i-- > 0;) {
    Block* block = list[i];
    if (block->queue != queue) continue;
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
    --parked_count;
    block->parked = false;
    return block;
  }
  return nullptr;
}

// Returns every parked block to its pool, merged.
void CachingAllocator::Impl::unpark_all() {
  if (parked_count == 0) return;
  for (auto& list : parked) {
    for (Block* block : list) {
      block->parked = false;
      return_to_pool(block);
    }
    list.clear();
  }
  parked_count = 0;
}

void CachingAllocator::Impl::free(void* ptr) {
  auto it = active_blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == active_blocks.end()) {
    throw InvalidArgumentError(
        "free: pointer " + pointer_string(ptr) +
        " is not a live allocation of the caching allocator of device " +
        std::to_string(device) + " (never allocated there, or freed twice)");
  }
  Block* block = it->second;
  active_blocks.erase(it);
  block->allocated = false;
  trace(TraceEvent::Action::FreeRequested, block->ptr, block->size, block->queue);
  const Pool kind = block->pool->stat_pool();
  // Allocated counters drop now; active ones when the block is truly free.
  update_stat(stats.allocation, kind, -1);
  update_stat(stats.allocated_bytes, kind, -static_cast<int64_t>(block->size));
  update_stat(stats.requested_bytes, kind,
              -static_cast<int64_t>(block->requested_size));
  if (!block->stream_uses.empty()) {
    try {
      insert_events(block);
    } catch (...) {
      // Without any event to wait for, the block can only be freed now.
      if (block->event_count == 0) free_block(block);
      throw;
    }
  } else if (park(block)) {
    trace(TraceEvent::Action::FreeCompleted, block->ptr, block->size, block->queue);
  } else {
    free_block(block);
  }
}

// An unused block stops being active and returns to its pool.
void CachingAllocator::Impl::free_block(Block* block) {
  trace(TraceEvent::Action::FreeCompleted, block->ptr, block->size, block->queue);
  deactivate(block);
  return_to_pool(block);
}

// No client or queue uses the block any more.
void CachingAllocator::Impl::deactivate(Block* block) {
  const Pool kind = block->pool->stat_pool();
  update_stat(stats.active, kind, -1);
  update_stat(stats.active_bytes, kind, -static_cast<int64_t>(block->size));
}

// Puts an inactive block back in its pool, merged with free neighbours.
void CachingAllocator::Impl::return_to_pool(Block* block) {
  BlockPool& pool = *block->pool;
  const Pool kind = pool.stat_pool();
  int64_t inactive_blocks = 0;
  int64_t inactive_bytes = 0;
  auto mergeable = [](const Block* b) { return b != nullptr && b->mergeable(); };
  // The lower block survives a merge, so segment heads stay put.
  if (mergeable(block->prev)) {
    Block* prev = block->prev;
    pool.blocks.erase(prev);
    inactive_blocks -= 1;
    inactive_bytes -= static_cast<int64_t>(prev->size);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) prev->next->prev = prev;
    delete block;
    block = prev;
  }
  if (mergeable(block->next)) {
    Block* next = block->next;
    pool.blocks.erase(next);
    inactive_blocks -= 1;
    inactive_bytes -= static_cast<int64_t>(next->size);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete next;
  }
  block->requested_size = 0;
  pool.blocks.insert(block);
  if (block->is_split()) {
    inactive_blocks += 1;
    inactive_bytes += static_cast<int64_t>(block->size);
  }
  update_stat(stats.inactive_split, kind, inactive_blocks);
  update_stat(stats.inactive_split_bytes, kind, inactive_bytes);
}

void CachingAllocator::Impl::record_stream(void* ptr, Queue* queue) {
  Block* block = find_active(ptr);
  if (block == nullptr || block->ptr != ptr) {
    throw InvalidArgumentError("record_stream: pointer " + pointer_string(ptr) +
                               " is not a live allocation of device " +
                               std::to_string(device));
  }
  // The allocating queue already orders the block's reuse.
  if (queue == nullptr || queue == block->queue) return;
  block->stream_uses.insert(queue);
}

// One event per extra queue; the block is reused once all of them complete.
void CachingAllocator::Impl::insert_events(Block* block) {
  std::set<Queue*> queues = std::move(block->stream_uses);
  block->stream_uses.clear();
  for (Queue* queue : queues) {
    std::unique_ptr<Event> event =
        driver.create_event(queue->device(), /*enable_timing=*/false);
    queue->record(*event);
    ++block->event_count;
    pending_frees.push_back({std::move(event), block});
  }
}

void CachingAllocator::Impl::process_events() {
  for (size_t i = 0; i < pending_frees.size();) {
    if (!pending_frees[i].event->query()) {
      ++i;
      continue;
    }
    Block* block = pending_frees[i].block;
    pending_frees[i] = std::move(pending_frees.back());
    pending_frees.pop_back();
    if (--block->event_count == 0) free_block(block);
  }
}

void CachingAllocator::Impl::synchronize_and_free_events() {
  ++stats.num_sync_all_streams;
  std::vector<PendingFree> pending = std::move(pending_frees);
  pending_frees.clear();
  for (auto& [event, block] : pending) {
    event->synchronize();
    if (--block->event_count == 0) free_block(block);
  }
}

void CachingAllocator::Impl::release_cached_blocks() {
  synchronize_and_free_events();
  unpark_all();
  for (BlockPool* pool : {&small_pool, &large_pool}) {
    for (auto it = pool->blocks.begin(); it != pool->blocks.end();) {
      Block* block = *it;
      if (block->is_split()) {
        ++it;
        continue;
      }
      it = pool->blocks.erase(it);
      release_segment(block);
    }
  }
}

// Gives a whole unused segment (one unsplit free block) back to the driver.
void CachingAllocator::Impl::release_segment(Block* head) {
  const Pool kind = head->pool->stat_pool();
  segments.erase(reinterpret_cast<uintptr_t>(head->ptr));
  trace(TraceEvent::Action::SegmentFree, head->ptr, head->size, head->queue);
  driver.free(device, head->ptr, head->size);
  update_stat(stats.segment, kind, -1);
  update_stat(stats.reserved_bytes, kind, -static_cast<int64_t>(head->size));
  ++stats.num_device_free;
  delete head;
}

// The allocated block containing `ptr`, or nullptr.
Block* CachingAllocator::Impl::find_active(const void* ptr) const {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = segments.upper_bound(address);
  if (it == segments.begin()) return nullptr;
  --it;
  if (address >= it->first + it->second.size) return nullptr;
  for (Block* b = it->second.head; b != nullptr; b = b->next) {
    const auto start = reinterpret_cast<uintptr_t>(b->ptr);
    if (address >= start && address < start + b->size)
      return b->allocated ? b : nullptr;
  }
  return nullptr;
}

CachingAllocator::CachingAllocator(Driver& driver, int device, size_t capacity)
    : impl_(std::make_unique<Impl>(driver, device, capacity)),
      device_(device),
      capacity_(capacity) {}

CachingAllocator::~CachingAllocator() = default;

void* CachingAllocator::allocate(size_t bytes, const Queue* queue) {
  if (bytes == 0) return nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (!reclaim_) return impl_->malloc(bytes, queue, /*last_try=*/true);
    if (void* ptr = impl_->malloc(bytes, queue, /*last_try=*/false)) return ptr;
  }
  // Without our lock: the callback takes other allocators' locks.
  reclaim_(device_);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->malloc(bytes, queue, /*last_try=*/true);
}

void CachingAllocator::set_reclaim(std::function<void(int device)> reclaim) {
  reclaim_ = std::move(reclaim);
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->free(ptr);
}

void CachingAllocator::record_stream(void* ptr, Queue* queue) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->record_stream(ptr, queue);
}

bool CachingAllocator::owns(void* ptr) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->active_blocks.count(reinterpret_cast<uintptr_t>(ptr)) != 0;
}

size_t CachingAllocator::allocation_size(void* ptr) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Block* block = impl_->find_active(ptr);
  return block == nullptr ? 0 : block->size;
}

void CachingAllocator::set_memory_fraction(double fraction) {
  if (!(fraction >= 0.0 && fraction <= 1.0)) {
    throw InvalidArgumentError("Invalid memory fraction " + std::to_string(fraction) +
                               " for device " + std::to_string(device_) +
                               ": expected a value from 0 to 1");
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->set_fraction(fraction);
}

double CachingAllocator::memory_fraction() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->fraction;
}

size_t CachingAllocator::memory_limit() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->limit;
}

void CachingAllocator::set_trace_observer(TraceObserver observer) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->observer = std::move(observer);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->release_cached_blocks();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->unpark_all();
  return impl_->stats;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->unpark_all();
  AllocatorStats& s = impl_->stats;
  for (StatArray* array :
       {&s.allocation, &s.segment, &s.active, &s.inactive_split,
        &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes,
        &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& stat : *array) stat.reset_peak();
  }
  s.oversize_allocations.reset_peak();
  s.oversize_segments.reset_peak();
}

void CachingAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  AllocatorStats& s = impl_->stats;
  for (StatArray* array :
       {&s.allocation, &s.segment, &s.active, &s.inactive_split,
        &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes,
        &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& stat : *array) stat.reset_accumulated();
  }
  s.oversize_allocations.reset_accumulated();
  s.oversize_segments.reset_accumulated();
  s.num_alloc_retries = 0;
  s.num_ooms = 0;
  s.num_sync_all_streams = 0;
  s.num_device_alloc = 0;
  s.num_device_free = 0;
}

std::vector<SegmentSnapshot> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->unpark_all();
  std::vector<SegmentSnapshot> result;
  result.reserve(impl_->segments.size());
  for (const auto& [address, segment] : impl_->segments) {
    SegmentSnapshot snap;
    snap.device = device_;
    snap.address = address;
    snap.total_size = segment.size;
    snap.queue = segment.head->queue;
    snap.is_large = !segment.head->pool->is_small;
    for (const Block* b = segment.head; b != nullptr; b = b->next) {
      BlockSnapshot block;
      block.address = reinterpret_cast<uintptr_t>(b->ptr);
      block.size = b->size;
      block.requested_size = b->active() ? b->requested_size : 0;
      block.allocated = b->allocated;
      block.active = b->active();
      if (b->allocated) snap.allocated_size += b->size;
      if (b->active()) snap.active_size += b->size;
      snap.blocks.push_back(block);
    }
    result.push_back(std::move(snap));
  }
  return result;
}

}  // namespace openneuron::hal
