#include "torch/runtime/profiler.h"

// Kineto's GenericTraceActivity formats metadata with fmt, whose compiled
// part PyTorch does not export: header-only here.
#define FMT_HEADER_ONLY
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <libkineto.h>
#include <output_base.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hal/driver.h"
#include "torch/runtime/device.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {

namespace detail {
std::atomic<bool> g_profiler_recording{false};

struct ActivityRecord {
  std::string name;
  c10::DeviceIndex device;
  const hal::Queue* queue;  // nullptr: a synchronous driver call
  DeviceActivityKind kind;
  int64_t bytes;
  uint64_t correlation;
  int32_t thread;                          // the launching thread
  int64_t launch_begin_ns, launch_end_ns;  // on the host
  std::unique_ptr<hal::Event> start, end;  // on the queue
};
}  // namespace detail

namespace {

using detail::ActivityRecord;

// The op (its Kineto correlation id) running on this thread.
thread_local std::vector<uint64_t> t_correlation;

int64_t host_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Anchor {
  std::unique_ptr<hal::Event> event;  // recorded on the device's queue at start
  int64_t host_ns;                    // when the host saw it complete
};

struct Recording {
  std::mutex mutex;
  std::vector<std::unique_ptr<ActivityRecord>> records;
  std::map<c10::DeviceIndex, Anchor> anchors;
  std::map<const hal::Queue*, int64_t> queue_ids;  // a trace row per queue, in order of first use
};

const char* launch_name(DeviceActivityKind kind) {
  switch (kind) {
    case DeviceActivityKind::Kernel: return "neuronLaunchKernel";
    case DeviceActivityKind::Copy: return "neuronMemcpyAsync";
    case DeviceActivityKind::Fill: return "neuronMemsetAsync";
  }
  return "neuronLaunch";
}

Recording& recording() {
  static auto* r = new Recording();
  return *r;
}

libkineto::ActivityType kineto_type(DeviceActivityKind kind) {
  switch (kind) {
    case DeviceActivityKind::Kernel: return libkineto::ActivityType::CONCURRENT_KERNEL;
    case DeviceActivityKind::Copy: return libkineto::ActivityType::GPU_MEMCPY;
    case DeviceActivityKind::Fill: return libkineto::ActivityType::GPU_MEMSET;
  }
  return libkineto::ActivityType::CONCURRENT_KERNEL;
}

class NeuronSession : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    Recording& r = recording();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.records.clear();
    r.anchors.clear();
    r.queue_ids.clear();
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      // Device times are read relative to this event, which completes at
      // once on an idle queue: its host time is taken after it has.
      auto& queue = current_queue(d);
      queue.synchronize();
      Anchor a{hal::driver().create_event(d, /*enable_timing=*/true), 0};
      queue.record(*a.event);
      a.event->synchronize();
      a.host_ns = host_ns();
      r.anchors.emplace(d, std::move(a));
    }
    detail::g_profiler_recording.store(true);
  }

  void stop() override { detail::g_profiler_recording.store(false); }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    Recording& r = recording();
    std::lock_guard<std::mutex> lock(r.mutex);
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    const int64_t pid = ::getpid();
    uint32_t flow = 0;
    for (const auto& rec : r.records) {
      int64_t begin = rec->launch_begin_ns, finish = rec->launch_end_ns;  // a synchronous call: its host span
      if (rec->queue) {
        const Anchor& anchor = r.anchors.at(rec->device);
        rec->end->synchronize();
        const auto at = [&](const hal::Event& e) {
          return anchor.host_ns + static_cast<int64_t>(anchor.event->elapsed_ms(e) * 1e6);
        };
        // Work never starts before its launch: should the wall clock step
        // while profiling, the one anchor would map it there.
        begin = std::max(rec->launch_begin_ns, at(*rec->start));
        finish = std::max(begin, at(*rec->end));
      }
      const libkineto::ITraceActivity* op =
          linked && rec->correlation ? linked(static_cast<int32_t>(rec->correlation)) : nullptr;
      // The launch on the host thread, with a flow arrow to the device's work.
      auto launch = std::make_unique<libkineto::GenericTraceActivity>(
          buffer_->span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME, launch_name(rec->kind));
      launch->startTime = rec->launch_begin_ns;
      launch->endTime = rec->launch_end_ns;
      launch->id = 0;  // the op's id would make PyTorch take this event for the op
      launch->device = pid;
      launch->resource = rec->thread;
      launch->linked = op;
      launch->flow.id = ++flow;
      launch->flow.type = libkineto::kLinkAsyncCpuGpu;
      launch->flow.start = 1;
      auto act = std::make_unique<libkineto::GenericTraceActivity>(buffer_->span, kineto_type(rec->kind), rec->name);
      act->startTime = begin;
      act->endTime = finish;
      act->id = static_cast<int32_t>(rec->correlation);
      act->device = rec->device;
      // A row per queue (1, 2, ...); row 0 holds the synchronous copies.
      if (rec->queue) {
        auto [it, fresh] = r.queue_ids.emplace(rec->queue, static_cast<int64_t>(r.queue_ids.size()) + 1);
        act->resource = it->second;
      } else {
        act->resource = 0;
      }
      act->linked = op;
      act->flow.id = flow;
      act->flow.type = libkineto::kLinkAsyncCpuGpu;
      act->flow.start = 0;
      // As CUDA's trace: "device" a number (TensorBoard's plugin groups by it).
      if (rec->bytes) act->addMetadata("bytes", rec->bytes);
      act->addMetadata("device", static_cast<int>(rec->device));
      if (!rec->queue) act->addMetadataQuoted("synchronous", "true");
      buffer_->activities.push_back(std::move(launch));
      buffer_->activities.push_back(std::move(act));
    }
    r.records.clear();
    for (const auto& a : buffer_->activities) logger.handleGenericActivity(*a);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }

  // The "deviceProperties" of the trace, one object per device.
  std::string getDeviceProperties() override {
    std::string out;
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      const hal::DeviceProperties p = hal::driver().properties(d);
      std::string name;
      for (char c : p.name) name += (c == '"' || c == '\\') ? ' ' : c;
      out += (d ? ", " : "") + std::string("{\"id\": ") + std::to_string(d) + ", \"name\": \"" + name +
             "\", \"totalGlobalMem\": " + std::to_string(p.total_memory) +
             ", \"numSms\": " + std::to_string(p.compute_units) + ", \"warpSize\": " +
             std::to_string(p.subgroup_size) + ", \"sharedMemPerBlock\": " + std::to_string(p.shared_memory_bytes) +
             ", \"driver\": \"" + p.driver + "\"}";
    }
    return out;
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }

 private:
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class NeuronActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return types_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>&,
                                                                 const libkineto::Config&) override {
    return std::make_unique<NeuronSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "neuron";
  std::set<libkineto::ActivityType> types_ = {libkineto::ActivityType::CONCURRENT_KERNEL,
                                              libkineto::ActivityType::GPU_MEMCPY,
                                              libkineto::ActivityType::GPU_MEMSET};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace

namespace detail {

ActivityRecord* begin_activity(hal::Queue* queue, c10::DeviceIndex device, const char* name,
                               DeviceActivityKind kind, int64_t bytes) {
  auto rec = std::make_unique<ActivityRecord>();
  rec->name = name;
  rec->device = device;
  rec->queue = queue;
  rec->kind = kind;
  rec->bytes = bytes;
  rec->correlation = t_correlation.empty() ? 0 : t_correlation.back();
  rec->thread = static_cast<int32_t>(::syscall(SYS_gettid));
  rec->launch_begin_ns = host_ns();
  if (queue) {
    rec->start = hal::driver().create_event(device, /*enable_timing=*/true);
    rec->end = hal::driver().create_event(device, /*enable_timing=*/true);
    queue->record(*rec->start);
  }
  return rec.release();
}

void end_activity(ActivityRecord* record, hal::Queue* queue) {
  std::unique_ptr<ActivityRecord> owned(record);
  if (queue) queue->record(*owned->end);
  owned->launch_end_ns = host_ns();
  Recording& r = recording();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.records.push_back(std::move(owned));
}

}  // namespace detail

}  // namespace openneuron::integration
