// torch.neuron.memory._record_memory_history / _snapshot, in the format of
// torch.cuda.memory's, so torch.cuda._memory_viz and PyTorch's web viewer
// read it: the caching allocator's segments and blocks (each live block
// with the stack that allocated it) and, per device, a trace of alloc,
// free_requested, free_completed, segment_alloc, segment_free and oom
// events with their stacks and times.
//
// Stacks are gathered (torch::CapturedTraceback) on the allocating or
// freeing thread before the allocator's lock is taken, as CUDA's allocator
// does: gathering Python frames may take the GIL. Off, it costs one relaxed
// load per allocation and free.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <c10/core/Allocator.h>

namespace pybind11 {
class dict;  // the allocator's callers need none of pybind11
}

namespace openneuron::integration {

struct MemoryHistoryOptions {
  // "all": state and trace; "state": live blocks' stacks only; nullopt: off.
  std::optional<std::string> enabled = "all";
  // Which events get a stack: "all", "state" (allocations), "alloc"
  // (allocations and their segments), or nullopt (none).
  std::optional<std::string> context = "all";
  std::string stacks = "all";  // "python", or "all" (C++ frames too)
  size_t max_entries = SIZE_MAX;  // trace entries kept per device (newest)
  bool clear_history = false;
};

void record_memory_history(const MemoryHistoryOptions& options);

// {"segments": [...], "device_traces": [[...] per device], "allocator_settings": {}}
pybind11::dict memory_snapshot_with_history();

namespace detail {
extern std::atomic<bool> g_history_on;
// Gathers this thread's stack for the events of the call that follows
// (nullptr by the policy), and forgets it.
void set_thread_context(bool is_alloc);
void clear_thread_context();
}  // namespace detail

// Around an allocator call: the stack of its events, when history is on.
class HistoryContext {
 public:
  explicit HistoryContext(bool is_alloc) : on_(detail::g_history_on.load(std::memory_order_relaxed)) {
    if (C10_UNLIKELY(on_)) detail::set_thread_context(is_alloc);
  }
  ~HistoryContext() {
    if (C10_UNLIKELY(on_)) detail::clear_thread_context();
  }
  HistoryContext(const HistoryContext&) = delete;
  HistoryContext& operator=(const HistoryContext&) = delete;

 private:
  bool on_;
};

}  // namespace openneuron::integration
