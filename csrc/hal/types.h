// Plain value types shared by every driver.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace openneuron::hal {

// A location in device memory, as Driver::allocate hands it out. Only the
// driver interprets it (a host pointer on the host driver; a pointer into
// memory the host cannot touch on the protected driver; a buffer device
// address on a GPU). Offsets are plain arithmetic: `addr + n` names the byte
// n past `addr` within the same allocation, so views of a buffer need no
// help from the driver. Code above the HAL must never dereference one unless
// DeviceProperties::host_addressable says it may.
using DeviceAddress = void*;

struct DeviceProperties {
  std::string name;           // e.g. "OpenNeuron host device 0"
  std::string driver;         // e.g. "host"
  size_t total_memory = 0;    // bytes the device may hand out (its capacity)
  // The largest single allocate() the device can satisfy (a Vulkan device's
  // maxMemoryAllocationSize); requests above it fail at once.
  size_t max_allocation = 0;
  int compute_units = 0;      // parallel workers a kernel can use
  bool host_addressable = false;  // host code may read/write device memory
  // Device and host share physical memory (an integrated GPU, the CPU
  // drivers): copies cost a memcpy, not a bus transfer.
  bool unified_memory = false;
  // Kernels run on the thread that launches them, on the host's CPU cores
  // (the host driver): a second host thread driving the device buys no
  // concurrency, only a second thread pool on the same cores.
  bool runs_on_host_threads = false;
  // Kernels may read host (CPU) memory when they run: a CPU scalar operand
  // (an optimizer's step count) is passed to a kernel as a pointer.
  bool kernels_read_host_memory = false;
  // Dtypes the device's kernels compute in natively; others must be
  // emulated or refused, never silently narrowed.
  bool native_fp64 = false;
  bool native_int64 = false;
  bool native_fp16 = false;
  bool native_bf16 = false;
  bool native_int8 = false;
  // Matrix units a kernel reaches through VK_KHR_cooperative_matrix, with
  // the shape float16 products use (16x16x16 float16 -> float32 at subgroup
  // scope), enabled on the device.
  bool cooperative_matrix = false;
  // Which kernel runs float16 products on matrix units: none; the
  // cooperative-matrix one (cooperative_matrix, subgroups of 32, and
  // OPENNEURON_VULKAN_MATRIX_UNITS not 0); or, with
  // OPENNEURON_VULKAN_MATRIX_UNITS=emulate, the same kernel with the matrix
  // operations in plain arithmetic, to test it on any device.
  enum class MatrixUnits { kNone, kCooperative, kEmulated };
  MatrixUnits matrix_units = MatrixUnits::kNone;
  // The compiler target whose executables load_executable takes ("cpp": a
  // shared object of C++ kernels, the CPU drivers).
  std::string kernel_target;
  int subgroup_size = 1;            // lanes that run in lockstep (1: a CPU)
  int64_t max_workgroups = INT32_MAX;  // per dispatch, along x
  size_t shared_memory_bytes = 0;   // per workgroup
  // The library's kernels that stage tiles in shared memory behind
  // workgroup barriers run here (the device's limits allow them).
  bool tiled_kernels = false;
  // Loop trips one kernel invocation may run in all before the device stops
  // it (0: no limit). Mesa's lavapipe silently ends an invocation after
  // 65535: kernels that loop along a dim are not launched past it.
  int64_t max_loop_trips = 0;
};

// What bounds a device's allocations (Driver::memory_budget): for
// mem_get_info and out-of-memory messages.
struct MemoryBudget {
  size_t total = 0;  // bytes the device may hold at most (its capacity)
  size_t free = 0;   // bytes allocate() may still obtain now
  bool shared = false;  // every device of the driver draws on this one budget
  // The limit in words, with the setting that changes it: "the 4 host devices
  // share 18.80 GiB (OPENNEURON_HOST_DEVICE_MEMORY)".
  std::string description;
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

const char* to_string(CopyKind kind);

// How many workgroups a dispatch runs. The CPU drivers run one workgroup
// per thread they may use: x is that thread count.
struct Grid {
  int64_t x = 1, y = 1, z = 1;
};

// What an executable's entry point expects (Executable::entry_info).
struct EntryInfo {
  std::string name;
  int bindings = 0;  // device buffers, in order
  int scalars = 0;   // 64-bit scalar arguments (push constants)
  std::array<int, 3> workgroup_size{1, 1, 1};
};

}  // namespace openneuron::hal
