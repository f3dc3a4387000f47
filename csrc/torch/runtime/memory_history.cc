#include "torch/runtime/memory_history.h"

#include <pybind11/pybind11.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "hal/caching_allocator.h"
#include "torch/runtime/device.h"

namespace py = pybind11;

// Declared in torch/csrc/profiler/python/combined_traceback.h, which the
// wheel ships without the nlohmann/json header it includes (PyTorch 2.13):
// frames of each traceback as lists of {"name", "filename", "line"} dicts,
// what torch.cuda.memory._snapshot() holds.
namespace torch {
TORCH_API std::vector<py::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
}  // namespace torch

namespace openneuron::integration {

namespace detail {
std::atomic<bool> g_history_on{false};
}  // namespace detail

namespace {

using hal::TraceEvent;
using Context = std::shared_ptr<c10::GatheredContext>;

struct Entry {
  TraceEvent::Action action;
  uintptr_t address;
  size_t size;
  uintptr_t stream;
  size_t device_free;
  int64_t time_us;
  Context context;
};

struct History {
  std::mutex mutex;
  bool trace = false;        // enabled == "all": keep the event trace
  size_t max_entries = SIZE_MAX;
  std::atomic<bool> stack_on_alloc{false}, stack_on_free{false}, cpp_frames{false};
  std::map<int, std::deque<Entry>> traces;            // by device
  std::map<std::pair<int, uintptr_t>, Context> live;  // allocated block -> its allocation's stack
  std::map<std::pair<int, uintptr_t>, Context> segments;
};

History& history() {
  static auto* h = new History();  // leaked: frees may come during exit
  return *h;
}

thread_local Context t_context;

const char* action_name(TraceEvent::Action a) {
  switch (a) {
    case TraceEvent::Action::Alloc: return "alloc";
    case TraceEvent::Action::FreeRequested: return "free_requested";
    case TraceEvent::Action::FreeCompleted: return "free_completed";
    case TraceEvent::Action::SegmentAlloc: return "segment_alloc";
    case TraceEvent::Action::SegmentFree: return "segment_free";
    case TraceEvent::Action::Oom: return "oom";
  }
  return "unknown";
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The allocators' observer: runs under an allocator's lock, so it only
// files the event with the stack its thread gathered beforehand.
void observe(int device, const TraceEvent& e) {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mutex);
  const std::pair<int, uintptr_t> key{device, e.address};
  switch (e.action) {
    case TraceEvent::Action::Alloc: h.live[key] = t_context; break;
    case TraceEvent::Action::FreeCompleted: h.live.erase(key); break;
    case TraceEvent::Action::SegmentAlloc: h.segments[key] = t_context; break;
    case TraceEvent::Action::SegmentFree: h.segments.erase(key); break;
    default: break;
  }
  if (!h.trace) return;
  auto& trace = h.traces[device];
  trace.push_back(Entry{e.action, e.address, e.size, reinterpret_cast<uintptr_t>(e.queue), e.device_free,
                        now_us(), t_context});
  while (trace.size() > h.max_entries) trace.pop_front();
}

// Frames of each context, symbolized together (frames are shared).
class Symbolizer {
 public:
  size_t add(const Context& c) {
    auto* tb = dynamic_cast<torch::CapturedTraceback*>(c.get());
    if (!tb) return SIZE_MAX;
    tracebacks_.push_back(tb);
    return tracebacks_.size() - 1;
  }
  void run() { frames_ = torch::py_symbolize(tracebacks_); }
  py::object frames(size_t index) const { return index == SIZE_MAX ? py::list() : frames_[index]; }

 private:
  std::vector<torch::CapturedTraceback*> tracebacks_;
  std::vector<py::object> frames_;
};

}  // namespace

namespace detail {

void set_thread_context(bool is_alloc) {
  History& h = history();
  if (!(is_alloc ? h.stack_on_alloc : h.stack_on_free).load(std::memory_order_relaxed)) return;
  t_context = torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true,
                                               h.cpp_frames.load(std::memory_order_relaxed));
}

void clear_thread_context() { t_context.reset(); }

}  // namespace detail

void record_memory_history(const MemoryHistoryOptions& options) {
  auto check = [](bool ok, const std::string& what) { TORCH_CHECK(ok, "_record_memory_history: ", what); };
  if (options.enabled) check(*options.enabled == "all" || *options.enabled == "state",
                             "enabled must be 'all', 'state' or None, got '" + *options.enabled + "'");
  if (options.context)
    check(*options.context == "all" || *options.context == "state" || *options.context == "alloc",
          "context must be 'all', 'state', 'alloc' or None, got '" + *options.context + "'");
  check(options.stacks == "all" || options.stacks == "python",
        "stacks must be 'all' or 'python', got '" + options.stacks + "'");
  History& h = history();
  const bool on = options.enabled.has_value();
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    h.trace = on && *options.enabled == "all";
    h.max_entries = std::max<size_t>(options.max_entries, 1);
    h.stack_on_alloc = on && options.context.has_value();
    h.stack_on_free = on && options.context == "all";
    h.cpp_frames = options.stacks == "all";
    if (options.clear_history) h.traces.clear();
  }
  for (c10::DeviceIndex d = 0; d < device_count(); ++d)
    hal::device_allocator(d).set_trace_observer(on ? hal::TraceObserver(observe) : hal::TraceObserver());
  detail::g_history_on.store(on, std::memory_order_relaxed);
}

py::dict memory_snapshot_with_history() {
  // The allocators' state first: their locks are taken before ours there too.
  std::vector<std::vector<hal::SegmentSnapshot>> state;
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) state.push_back(hal::device_allocator(d).snapshot());
  History& h = history();
  std::map<std::pair<int, uintptr_t>, Context> live, segments;
  std::map<int, std::deque<Entry>> traces;
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    live = h.live;
    segments = h.segments;
    traces = h.traces;
  }
  Symbolizer symbols;
  auto find = [](const auto& map, int device, uintptr_t address) {
    auto it = map.find({device, address});
    return it == map.end() ? Context() : it->second;
  };
  std::vector<size_t> segment_frames, block_frames, trace_frames;
  for (const auto& device_state : state)
    for (const auto& seg : device_state) {
      segment_frames.push_back(symbols.add(find(segments, seg.device, seg.address)));
      for (const auto& b : seg.blocks)
        block_frames.push_back(b.allocated ? symbols.add(find(live, seg.device, b.address)) : SIZE_MAX);
    }
  for (const auto& [device, trace] : traces)
    for (const Entry& e : trace) trace_frames.push_back(symbols.add(e.context));
  symbols.run();

  py::list segment_list;
  size_t si = 0, bi = 0, ti = 0;
  for (const auto& device_state : state)
    for (const auto& seg : device_state) {
      py::dict d;
      d["device"] = seg.device;
      d["address"] = seg.address;
      d["total_size"] = seg.total_size;
      d["allocated_size"] = seg.allocated_size;
      d["active_size"] = seg.active_size;
      d["stream"] = reinterpret_cast<uintptr_t>(seg.queue);
      d["segment_type"] = seg.is_large ? "large" : "small";
      d["segment_pool_id"] = py::make_tuple(0, 0);
      d["is_expandable"] = false;
      d["frames"] = symbols.frames(segment_frames[si++]);
      size_t requested = 0;
      py::list blocks;
      for (const auto& b : seg.blocks) {
        py::dict bd;
        bd["address"] = b.address;
        bd["size"] = b.size;
        bd["requested_size"] = b.requested_size;
        bd["state"] = b.allocated ? "active_allocated" : (b.active ? "active_pending_free" : "inactive");
        bd["frames"] = symbols.frames(block_frames[bi++]);
        requested += b.requested_size;
        blocks.append(bd);
      }
      d["requested_size"] = requested;
      d["blocks"] = blocks;
      segment_list.append(d);
    }
  py::list device_traces;
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    py::list entries;
    auto it = traces.find(d);
    if (it != traces.end())
      for (const Entry& e : it->second) {
        py::dict ed;
        ed["action"] = action_name(e.action);
        ed["addr"] = e.address;
        ed["size"] = e.size;
        ed["stream"] = e.stream;
        ed["time_us"] = e.time_us;
        if (e.action == TraceEvent::Action::Oom) ed["device_free"] = e.device_free;
        ed["frames"] = symbols.frames(trace_frames[ti++]);
        entries.append(ed);
      }
    device_traces.append(entries);
  }
  py::dict out;
  out["segments"] = segment_list;
  out["device_traces"] = device_traces;
  py::dict settings;
  settings["PYTORCH_NO_CUDA_MEMORY_CACHING"] = false;
  out["allocator_settings"] = settings;
  return out;
}

}  // namespace openneuron::integration
