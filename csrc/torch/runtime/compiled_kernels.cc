#include "torch/runtime/profiler.h"
#include "torch/runtime/compiled_kernels.h"

#include <algorithm>
#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "hal/driver.h"
#include "hal/error.h"
#include "torch/runtime/device.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {

namespace {

// The grid of a generated kernel's dispatch. The C++ target's kernels take
// one workgroup per thread they may use (0 here: decided at each launch).
// The GLSL target's kernels loop over their elements (and reductions over
// their rows) with any grid: one invocation per element of the largest
// buffer (no kernel iterates over more) where that is few workgroups, else
// enough to fill the device, each looping over several. Workgroups past the
// work still start and stop: on lavapipe 3.5 us each, most of a row
// reduction's time when every element had one (a [4096, 1000] sum: 167 ms,
// 33 ms with this rule's 512 workgroups). lavapipe stops an invocation after 65535 loop
// trips in all, so there the grid stays large enough that no invocation
// nears that (8 trips per element per workgroup at most: a row's passes).
struct GridRule {
  int64_t workgroup_size = 0;  // 0: the C++ target's rule
  int64_t max_workgroups = 1;
  int64_t filling_workgroups = 1;
  int64_t max_loop_trips = 0;  // 0: no limit
};

GridRule grid_rule(const hal::DeviceProperties& p, const hal::EntryInfo& info) {
  if (p.kernel_target == "cpp") return {};
  return {std::max(1, info.workgroup_size[0]), std::max<int64_t>(1, p.max_workgroups),
          int64_t{256} * std::max(1, p.compute_units), p.max_loop_trips};
}

int64_t launch_workgroups(const GridRule& rule, const std::vector<at::Tensor>& buffers) {
  if (rule.workgroup_size == 0) return at::get_num_threads();
  int64_t elements = 1;
  for (const at::Tensor& t : buffers) elements = std::max(elements, t.numel());
  const int64_t per_element = (elements + rule.workgroup_size - 1) / rule.workgroup_size;
  int64_t enough = rule.filling_workgroups;
  if (rule.max_loop_trips > 0) enough = std::max(enough, (8 * elements + rule.max_loop_trips - 1) / rule.max_loop_trips);
  return std::max<int64_t>(1, std::min({rule.max_workgroups, per_element, enough}));
}

struct Kernel {
  hal::Executable* executable;
  int entry;
  c10::DeviceIndex device;
  std::string name;
  std::string label;  // profiler event name
  bool reads_host_memory;  // CPU tensors may be among its (read) buffers
  GridRule grid;
};

struct Registry {
  std::mutex mutex;
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<hal::Executable>> libraries;
  std::deque<Kernel> kernels;  // a deque: launches keep pointers into it
};

Registry& registry() {
  static auto* r = new Registry();  // leaked: kernels may run during exit
  return *r;
}

}  // namespace

int64_t compiled_kernel(const std::string& path, const std::string& entry, int64_t device,
                        const std::string& label) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& lib = r.libraries[{path, device}];
  if (!lib) lib = hal::driver().load_executable(static_cast<int>(device), path);
  int index = lib->entry(entry);
  for (size_t i = 0; i < r.kernels.size(); ++i)
    if (r.kernels[i].executable == lib.get() && r.kernels[i].entry == index) return static_cast<int64_t>(i);
  const hal::DeviceProperties props = hal::driver().properties(static_cast<int>(device));
  r.kernels.push_back({lib.get(), index, static_cast<c10::DeviceIndex>(device), entry, label,
                       props.kernels_read_host_memory, grid_rule(props, lib->entry_info(index))});
  return static_cast<int64_t>(r.kernels.size()) - 1;
}

void launch_compiled_kernel(int64_t kernel, const std::vector<at::Tensor>& buffers,
                            const std::vector<int64_t>& symbols, int64_t workgroups) {
  const Kernel* entry;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    TORCH_CHECK(kernel >= 0 && kernel < static_cast<int64_t>(r.kernels.size()), "unknown compiled kernel ", kernel);
    entry = &r.kernels[kernel];
  }
  const Kernel& k = *entry;
  c10::SmallVector<hal::DeviceAddress, 32> addresses(buffers.size());
  // CPU scalars on a device whose kernels cannot read host memory travel to
  // it and back (a host store may write them: an optimizer's step count).
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> staged;  // (cpu, device copy)
  for (size_t i = 0; i < buffers.size(); ++i) {
    const at::Tensor& t = buffers[i];
    const bool host_scalar = t.device().is_cpu() && t.numel() == 1;
    TORCH_CHECK(host_scalar || (t.device().type() == kNeuron && t.device().index() == k.device),
                "compiled kernel ", k.name, ": buffer ", i, " is on ", t.device(), ", expected neuron:",
                int(k.device));
    if (host_scalar && !k.reads_host_memory) {
      staged.emplace_back(t, t.to(c10::Device(kNeuron, k.device)));
      addresses[i] = staged.back().second.unsafeGetTensorImpl()->mutable_data();
      continue;
    }
    addresses[i] = t.unsafeGetTensorImpl()->mutable_data();
  }
  flush_held_work(k.device);  // a compiled graph's kernel runs after held eager work (none when it is that work)
  RECORD_FUNCTION(k.label.c_str(), c10::ArrayRef<const c10::IValue>{});
  try {
    hal::Queue& queue = current_queue(k.device);
    DeviceActivity activity(&queue, k.device, k.label.c_str(), DeviceActivityKind::Kernel);
    queue.dispatch(*k.executable, k.entry, addresses, symbols, hal::Grid{workgroups > 0 ? workgroups : launch_workgroups(k.grid, buffers), 1, 1});
  } catch (const hal::Error& e) {
    TORCH_CHECK(false, "compiled kernel ", k.name, ": ", e.what());
  }
  for (auto& [cpu, device_copy] : staged) cpu.copy_(device_copy);
}

at::Tensor empty_compiled_buffer(c10::IntArrayRef size, c10::IntArrayRef stride, at::ScalarType dtype,
                                 int64_t device) {
  c10::DeviceGuard guard(c10::Device(kNeuron, resolve_device_index(device)));
  return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(kNeuron),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
}

}  // namespace openneuron::integration
