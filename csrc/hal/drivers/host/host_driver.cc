#include "hal/drivers/host/host_driver.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>

#include "hal/config.h"
#include "hal/drivers/host/host_event.h"
#include "hal/drivers/host/host_executable.h"
#include "hal/drivers/host/host_queue.h"
#include "hal/drivers/host/kernels/small_gemm.h"
#include "hal/drivers/host/kernels/transpose.h"
#include "hal/error.h"

namespace openneuron::hal {
namespace {

constexpr size_t kPageSize = 4096;
// From this size on, memory comes from mmap: pages the program never touches
// cost no RSS, and munmap returns the memory to the OS at once.
constexpr size_t kMmapThreshold = size_t{1} << 20;

}  // namespace

HostDriver::HostDriver()
    : HostDriver(config().host_device_count, config().host_device_memory) {}

HostDriver::HostDriver(int device_count, size_t budget)
    : device_count_(device_count), budget_(budget) {
  devices_.reserve(device_count);
  for (int i = 0; i < device_count; ++i) {
    devices_.push_back(std::make_unique<DeviceState>());
  }
}

HostDriver::~HostDriver() { release_all(); }

void HostDriver::release_all() {
  for (auto& device : devices_) {
    for (auto& [ptr, bytes] : device->allocations) unmap_memory(ptr, bytes);
    device->allocations.clear();
  }
}

void* HostDriver::map_memory(size_t bytes) {
  void* ptr = nullptr;
  if (bytes >= kMmapThreshold) {
    ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return ptr == MAP_FAILED ? nullptr : ptr;
  }
  return posix_memalign(&ptr, kPageSize, bytes) == 0 ? ptr : nullptr;
}

void HostDriver::unmap_memory(void* ptr, size_t bytes) {
  if (bytes >= kMmapThreshold) {
    munmap(ptr, bytes);
  } else {
    std::free(ptr);
  }
}

std::unique_ptr<HostQueue> HostDriver::make_queue(int device, int priority) {
  return std::make_unique<HostQueue>(device, priority);
}

void HostDriver::check_device(int device) const {
  if (device < 0 || device >= device_count_) {
    throw InvalidDeviceError(device, device_count_);
  }
}

DeviceProperties HostDriver::properties(int device) const {
  check_device(device);
  DeviceProperties props;
  props.name = "OpenNeuron host device " + std::to_string(device);
  props.driver = "host";
  props.total_memory = budget_;
  props.max_allocation = budget_;
  props.compute_units =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  props.host_addressable = true;
  props.unified_memory = true;
  props.runs_on_host_threads = true;
  props.kernels_read_host_memory = true;  // launches run synchronously, on the host
  // The CPU computes fp64 and int64 natively; fp16 and bf16 in float.
  props.native_fp64 = true;
  props.native_int64 = true;
  props.kernel_target = "cpp";
  props.subgroup_size = 1;
  props.shared_memory_bytes = 0;  // no workgroup-shared memory: one thread per workgroup
  return props;
}

void* HostDriver::allocate(int device, size_t bytes) {
  check_device(device);
  if (bytes == 0) return nullptr;
  DeviceState& state = *devices_[device];
  // Reserve first, so concurrent callers on any device cannot overshoot the
  // shared budget.
  size_t used = budget_used_.load(std::memory_order_relaxed);
  do {
    if (bytes > budget_ - used) return nullptr;
  } while (!budget_used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.used += bytes;
  }
  void* ptr = map_memory(bytes);
  std::lock_guard<std::mutex> lock(state.mutex);
  if (ptr == nullptr) {
    state.used -= bytes;
    budget_used_.fetch_sub(bytes, std::memory_order_relaxed);
    return nullptr;
  }
  state.allocations.emplace(ptr, bytes);
  return ptr;
}

void HostDriver::free(int device, void* ptr, size_t bytes) {
  check_device(device);
  if (ptr == nullptr) return;
  DeviceState& state = *devices_[device];
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    auto it = state.allocations.find(ptr);
    if (it == state.allocations.end() || it->second != bytes) {
      throw InvalidArgumentError(
          name() + " driver: free of an address that was not allocated on device " +
          std::to_string(device) + " with " + std::to_string(bytes) + " bytes");
    }
    state.allocations.erase(it);
    state.used -= bytes;
    budget_used_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  unmap_memory(ptr, bytes);
}

size_t HostDriver::used_memory(int device) const {
  check_device(device);
  DeviceState& state = *devices_[device];
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.used;
}

MemoryBudget HostDriver::memory_budget(int device) const {
  check_device(device);
  MemoryBudget budget;
  budget.total = budget_;
  budget.shared = true;
  budget.free = budget_ - std::min(budget_, budget_used_.load(std::memory_order_relaxed));
  budget.description = budget_description();
  return budget;
}

std::string HostDriver::budget_description() const {
  return (device_count_ == 1 ? "the " + name() + " device has "
                             : "the " + std::to_string(device_count_) + " " + name() +
                                   " devices share ") +
         format_bytes(budget_) + " (OPENNEURON_HOST_DEVICE_MEMORY)";
}

void HostDriver::copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  host_copy(nullptr, dst, src, bytes, kind);
}

std::unique_ptr<Queue> HostDriver::create_queue(int device, int priority) {
  check_device(device);
  std::unique_ptr<HostQueue> queue = make_queue(device, priority);
  DeviceState& state = *devices_[device];
  std::lock_guard<std::mutex> lock(state.mutex);
  // Drop entries of destroyed queues so the list does not grow forever.
  std::erase_if(state.queues, [](const auto& q) { return q.expired(); });
  state.queues.push_back(queue->core());
  return queue;
}

std::unique_ptr<Event> HostDriver::create_event(int device,
                                                bool enable_timing) {
  check_device(device);
  return std::make_unique<HostEvent>(device, enable_timing);
}

void HostDriver::synchronize(int device) {
  check_device(device);
  std::vector<std::shared_ptr<HostQueueCore>> queues;
  {
    std::lock_guard<std::mutex> lock(devices_[device]->mutex);
    for (const auto& weak : devices_[device]->queues) {
      if (auto queue = weak.lock()) queues.push_back(std::move(queue));
    }
  }
  // Wait for all queues first, then report the first error (consuming it,
  // as the queue's own synchronize would).
  std::exception_ptr first_error;
  for (const auto& queue : queues) {
    std::exception_ptr error = queue->wait_idle();
    if (error && !first_error) first_error = error;
  }
  if (first_error) std::rethrow_exception(first_error);
}

std::unique_ptr<Executable> HostDriver::load_executable(int device, const std::string& path) {
  check_device(device);
  return std::make_unique<HostExecutable>(path, device);
}

const HostKernels* HostDriver::host_kernels() const {
  static const HostKernels kernels{&host::small_gemm_applies, &host::small_gemm_f32,
                                   &host::small_gemm_column_grain, &host::transpose_f32};
  return &kernels;
}

}  // namespace openneuron::hal
