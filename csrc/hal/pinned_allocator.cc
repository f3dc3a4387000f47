#include "hal/pinned_allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "hal/driver.h"
#include "hal/error.h"

namespace openneuron::hal {
namespace {

constexpr size_t kMinPinnedSize = 4096;  // one page
constexpr size_t kMaxPinnedSize = size_t{1} << 62;

}  // namespace

struct PinnedAllocator::Impl {
  struct Block {
    size_t size = 0;
    bool allocated = false;
    bool locked = false;  // mlock succeeded, so munlock on release
    // Events recorded on queues that use the block; reuse waits for them.
    std::vector<std::unique_ptr<Event>> events;
  };

  ~Impl();
  Block* find(const void* ptr, uintptr_t* start);
  void process_pending();
  void release(uintptr_t start);

  mutable std::mutex mutex;
  std::map<uintptr_t, Block> blocks;  // every held block, by start address
  std::map<size_t, std::vector<uintptr_t>> free_lists;  // by size
  std::vector<uintptr_t> pending;  // freed, events not yet complete
  std::map<int, std::function<void(uintptr_t, size_t)>> release_listeners;
  int next_listener = 0;
  PinnedStats stats;
};

PinnedAllocator::Impl::~Impl() {
  // Copies may still read or write these blocks.
  for (auto& [start, block] : blocks) {
    for (auto& event : block.events) event->synchronize();
  }
  while (!blocks.empty()) release(blocks.begin()->first);
}

// The block containing `ptr` (allocated or not), or nullptr.
PinnedAllocator::Impl::Block* PinnedAllocator::Impl::find(const void* ptr,
                                                          uintptr_t* start) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = blocks.upper_bound(address);
  if (it == blocks.begin()) return nullptr;
  --it;
  if (address >= it->first + it->second.size) return nullptr;
  if (start != nullptr) *start = it->first;
  return &it->second;
}

// Moves freed blocks whose events all completed to the free lists.
void PinnedAllocator::Impl::process_pending() {
  for (size_t i = 0; i < pending.size();) {
    Block& block = blocks.at(pending[i]);
    std::erase_if(block.events, [](const auto& e) { return e->query(); });
    if (!block.events.empty()) {
      ++i;
      continue;
    }
    free_lists[block.size].push_back(pending[i]);
    pending[i] = pending.back();
    pending.pop_back();
  }
}

void PinnedAllocator::Impl::release(uintptr_t start) {
  auto it = blocks.find(start);
  for (auto& [id, listener] : release_listeners) listener(start, it->second.size);
  void* ptr = reinterpret_cast<void*>(start);
  if (it->second.locked) munlock(ptr, it->second.size);
  std::free(ptr);
  stats.reserved_bytes -= static_cast<int64_t>(it->second.size);
  ++stats.num_host_free;
  blocks.erase(it);
}

PinnedAllocator::PinnedAllocator() : impl_(std::make_unique<Impl>()) {}

PinnedAllocator::~PinnedAllocator() = default;

void* PinnedAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > kMaxPinnedSize) {
    throw Error("pinned allocation of " + format_bytes(bytes) +
                " is too large");
  }
  const size_t size = std::max(kMinPinnedSize, std::bit_ceil(bytes));
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->process_pending();
  uintptr_t start = 0;
  auto& free_list = impl_->free_lists[size];
  if (!free_list.empty()) {
    start = free_list.back();
    free_list.pop_back();
  } else {
    void* ptr = nullptr;
    if (posix_memalign(&ptr, kMinPinnedSize, size) != 0) {
      throw Error("pinned host allocation of " + format_bytes(size) +
                  " failed: out of host memory");
    }
    start = reinterpret_cast<uintptr_t>(ptr);
    Impl::Block block;
    block.size = size;
    // Best effort: RLIMIT_MEMLOCK is often small, and unlocked memory still
    // works, only without the guarantee of staying resident.
    block.locked = mlock(ptr, size) == 0;
    impl_->blocks.emplace(start, std::move(block));
    impl_->stats.reserved_bytes += static_cast<int64_t>(size);
    ++impl_->stats.num_host_alloc;
  }
  impl_->blocks.at(start).allocated = true;
  impl_->stats.allocated_bytes += static_cast<int64_t>(size);
  return reinterpret_cast<void*>(start);
}

void PinnedAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == impl_->blocks.end() || !it->second.allocated) {
    throw InvalidArgumentError(
        "free: pointer is not a live pinned allocation (never allocated by "
        "the pinned allocator, or freed twice)");
  }
  Impl::Block& block = it->second;
  block.allocated = false;
  impl_->stats.allocated_bytes -= static_cast<int64_t>(block.size);
  std::erase_if(block.events, [](const auto& e) { return e->query(); });
  if (block.events.empty()) {
    impl_->free_lists[block.size].push_back(it->first);
  } else {
    impl_->pending.push_back(it->first);
  }
}

void PinnedAllocator::record_use(const void* ptr, Queue& queue) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Impl::Block* block = impl_->find(ptr, nullptr);
  // Memory that is not pinned needs no tracking (like CUDA's recordEvent,
  // which ignores unknown pointers).
  if (block == nullptr || !block->allocated) return;
  // Completed events carry no information; drop them so a long-lived block
  // does not accumulate one per copy.
  std::erase_if(block->events, [](const auto& e) { return e->query(); });
  auto event = driver().create_event(queue.device(), /*enable_timing=*/false);
  queue.record(*event);
  block->events.push_back(std::move(event));
}

bool PinnedAllocator::is_pinned(const void* ptr) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Impl::Block* block = impl_->find(ptr, nullptr);
  return block != nullptr && block->allocated;
}

bool PinnedAllocator::find_block(const void* ptr, size_t bytes, uintptr_t* start, size_t* size) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  uintptr_t at = 0;
  const Impl::Block* block = impl_->find(ptr, &at);
  if (block == nullptr || !block->allocated) return false;
  if (reinterpret_cast<uintptr_t>(ptr) + bytes > at + block->size) return false;
  *start = at;
  *size = block->size;
  return true;
}

int PinnedAllocator::add_release_listener(std::function<void(uintptr_t, size_t)> fn) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const int id = impl_->next_listener++;
  impl_->release_listeners.emplace(id, std::move(fn));
  return id;
}

void PinnedAllocator::remove_release_listener(int id) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->release_listeners.erase(id);
}

void PinnedAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->process_pending();
  for (auto& [size, free_list] : impl_->free_lists) {
    for (uintptr_t start : free_list) impl_->release(start);
  }
  impl_->free_lists.clear();
}

PinnedStats PinnedAllocator::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

PinnedAllocator& pinned_allocator() {
  // Leaked on purpose: pinned tensors may be freed during static destruction.
  static auto* const instance = new PinnedAllocator;
  return *instance;
}

}  // namespace openneuron::hal
