// openneuron._C: the Python surface of the integration layer. Thin: every
// function forwards to the runtime; torch.neuron (Python) shapes the API.
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "compiler/codegen/gemm_launch.h"
#include "hal/caching_allocator.h"
#include "hal/driver.h"
#include "hal/pinned_allocator.h"
#include "torch/aten/eager/background_builds.h"
#include "torch/aten/eager/eager_fusion.h"
#include "torch/aten/cpu_fallback.h"
#include "torch/aten/eager/eager_kernel.h"
#include "torch/aten/router.h"
#include "torch/distributed/neuron_backend.h"
#include "torch/runtime/memory_history.h"
#include "torch/runtime/sync_debug.h"
#include "torch/runtime/compiled_kernels.h"
#include "torch/aten/host/cpu_allocation_redirect.h"
#include "torch/runtime/device.h"
#include "torch/runtime/device_allocator.h"
#include "torch/runtime/generator.h"
#include "torch/runtime/settings.h"
#include "torch/runtime/shared_storage.h"
#include "torch/runtime/streams.h"
#include "torch/runtime/transfer_stats.h"

namespace py = pybind11;

namespace openneuron::integration {
namespace {

py::dict stat_dict(const hal::Stat& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

py::dict stat_array_dict(const hal::StatArray& a) {
  py::dict d;
  d["all"] = stat_dict(a[0]);
  d["small_pool"] = stat_dict(a[1]);
  d["large_pool"] = stat_dict(a[2]);
  return d;
}

py::dict memory_stats(int device) {
  const auto s = hal::device_allocator(resolve_device_index(device)).stats();
  py::dict d;
  d["allocation"] = stat_array_dict(s.allocation);
  d["segment"] = stat_array_dict(s.segment);
  d["active"] = stat_array_dict(s.active);
  d["inactive_split"] = stat_array_dict(s.inactive_split);
  d["allocated_bytes"] = stat_array_dict(s.allocated_bytes);
  d["reserved_bytes"] = stat_array_dict(s.reserved_bytes);
  d["active_bytes"] = stat_array_dict(s.active_bytes);
  d["inactive_split_bytes"] = stat_array_dict(s.inactive_split_bytes);
  d["requested_bytes"] = stat_array_dict(s.requested_bytes);
  d["oversize_allocations"] = stat_dict(s.oversize_allocations);
  d["oversize_segments"] = stat_dict(s.oversize_segments);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["max_split_size"] = s.max_split_size;
  return d;
}

py::dict transfer_stats() {
  py::dict out;
  for (int d = 0; d < kNumDirections; ++d) {
    py::dict by_cause;
    for (int c = 0; c < kNumCauses; ++c) {
      const auto n = transfer_count(Direction(d), Cause(c));
      py::dict entry;
      entry["count"] = n.count;
      entry["bytes"] = n.bytes;
      by_cause[to_string(Cause(c))] = entry;
    }
    out[to_string(Direction(d))] = by_cause;
  }
  return out;
}

py::list fallback_records() {
  py::list out;
  for (const auto& r : fallback_report()) {
    py::dict d;
    d["op"] = r.op;
    d["calls"] = r.calls;
    d["seconds"] = r.seconds;
    out.append(d);
  }
  return out;
}

py::list eager_kernel_records() {
  py::list out;
  for (const auto& r : eager_kernel_report()) {
    py::dict d;
    d["op"] = r.op;
    d["launches"] = r.launches;
    d["kernels"] = r.kernels;
    d["builds"] = r.builds;
    d["declined"] = r.declined;
    out.append(d);
  }
  return out;
}

py::dict device_properties(int device) {
  const auto p = hal::driver().properties(resolve_device_index(device));
  py::dict d;
  d["name"] = p.name;
  d["driver"] = p.driver;
  d["total_memory"] = p.total_memory;
  d["compute_units"] = p.compute_units;
  d["host_addressable"] = p.host_addressable;
  d["runs_on_host_threads"] = p.runs_on_host_threads;
  d["kernels_read_host_memory"] = p.kernels_read_host_memory;
  d["max_allocation"] = p.max_allocation;
  d["unified_memory"] = p.unified_memory;
  d["kernel_target"] = p.kernel_target;
  d["native_fp64"] = p.native_fp64;
  d["native_int64"] = p.native_int64;
  d["native_fp16"] = p.native_fp16;
  d["native_bf16"] = p.native_bf16;
  d["subgroup_size"] = p.subgroup_size;
  d["shared_memory_bytes"] = p.shared_memory_bytes;
  d["tiled_kernels"] = p.tiled_kernels;
  // The kernel float16 products take on matrix units, if any (a device's
  // cooperative matrices count only where this build compiled the kernel).
  using MatrixUnits = hal::DeviceProperties::MatrixUnits;
  const std::string entry = compiler::float16_matrix_entry(p.matrix_units == MatrixUnits::kCooperative,
                                                           p.matrix_units == MatrixUnits::kEmulated);
  d["matrix_units"] = entry == "gemm_coop" ? "cooperative" : entry.empty() ? "none" : "emulated";
  return d;
}

void set_fallback_policy(const std::string& policy) {
  if (policy == "warn") set_cpu_fallback_policy(FallbackPolicy::Warn);
  else if (policy == "error") set_cpu_fallback_policy(FallbackPolicy::Error);
  else if (policy == "silent") set_cpu_fallback_policy(FallbackPolicy::Silent);
  else TORCH_CHECK_VALUE(false, "fallback policy must be warn, error or silent, got '", policy, "'");
}

std::string fallback_policy() {
  switch (settings().cpu_fallback) {
    case FallbackPolicy::Warn: return "warn";
    case FallbackPolicy::Error: return "error";
    case FallbackPolicy::Silent: return "silent";
  }
  return "warn";
}

// A subgroup's Gloo transport, made by openneuron.distributed (Python: the
// wheel ships no Gloo headers).
c10::intrusive_ptr<c10d::Backend> make_gloo_transport(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  py::gil_scoped_acquire gil;
  py::object make = py::module_::import("openneuron.distributed").attr("_create_transport");
  return make(store, rank, size, timeout.count())
      .cast<c10::intrusive_ptr<c10d::Backend>>();
}

c10::intrusive_ptr<c10d::Backend> create_distributed_backend(
    const c10::intrusive_ptr<c10d::Backend>& transport,
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    int64_t timeout_ms) {
  auto options = c10::make_intrusive<NeuronBackendOptions>(
      std::chrono::milliseconds(timeout_ms));
  return c10::make_intrusive<NeuronBackend>(transport, store, rank, size,
                                            std::move(options),
                                            &make_gloo_transport);
}

// After torch.distributed registered c10d's types (ours derive from them):
// lets Python read a neuron backend's options and copy them (split_group).
void register_distributed_types(py::module_ m) {
  if (py::hasattr(m, "NeuronBackendOptions")) return;
  py::class_<NeuronBackend, c10d::Backend, c10::intrusive_ptr<NeuronBackend>>(
      m, "NeuronBackend")
      .def_property_readonly("options", &NeuronBackend::getBackendOptions)
      .def_property_readonly("uses_shared_memory",
                             &NeuronBackend::uses_shared_memory);
  py::class_<NeuronBackendOptions, c10d::Backend::Options,
             c10::intrusive_ptr<NeuronBackendOptions>>(m, "NeuronBackendOptions")
      .def(py::init<>())
      .def("__copy__", [](const NeuronBackendOptions& o) {
        return c10::make_intrusive<NeuronBackendOptions>(o);
      })
      .def("__deepcopy__", [](const NeuronBackendOptions& o, const py::dict&) {
        return c10::make_intrusive<NeuronBackendOptions>(o);
      });
}

}  // namespace
}  // namespace openneuron::integration

PYBIND11_MODULE(_C, m) {
  using namespace openneuron::integration;
  install_cpu_allocation_redirect();
  route_ops_with_cpu_kernels_directly();
  m.def("_device_count", [] { return int(device_count()); });
  m.def("_unavailable_reason", [] { return unavailable_reason(); });
  m.def("_current_device", [] { return int(current_device()); });
  m.def("_set_device", [](int d) { set_current_device(d); });
  set_held_work_flush(&flush_held_calls);
  m.def("_synchronize", [](int d) {
    lazy_init();
    py::gil_scoped_release no_gil;
    flush_held_calls(d < 0 ? -1 : resolve_device_index(d));
    openneuron::hal::driver().synchronize(resolve_device_index(d));
  });
  m.def("_device_properties", &device_properties);
  m.def("_lazy_init", [] { lazy_init(); });
  m.def("_is_initialized", [] { return is_initialized(); });
  m.def("_is_in_bad_fork", [] { return in_bad_fork(); });
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(d)));
  });
  m.def("_memory_stats", &memory_stats);
  m.def("_record_memory_history", [](std::optional<std::string> enabled, std::optional<std::string> context,
                                     std::string stacks, size_t max_entries, bool clear_history) {
    record_memory_history({enabled, context, stacks, max_entries, clear_history});
  });
  m.def("_memory_snapshot_with_history", &memory_snapshot_with_history);
  // torch.neuron.caching_allocator_alloc / _delete: raw blocks on the current stream.
  m.def("_caching_allocator_alloc", [](size_t size, int device) {
    const auto index = resolve_device_index(device);
    c10::DataPtr data = allocate_device_memory(size, index, c10::Device(kNeuron, index));
    void* ptr = data.get();
    data.release_context();  // the caller frees it with _caching_allocator_delete
    return reinterpret_cast<uintptr_t>(ptr);
  });
  m.def("_caching_allocator_delete", [](uintptr_t ptr) {
    TORCH_CHECK(ptr == 0 || free_device_memory(reinterpret_cast<void*>(ptr)), "caching_allocator_delete: ",
                reinterpret_cast<void*>(ptr), " is not a live block of a neuron caching allocator");
  });
  m.def("_empty_cache", [] { device_allocator().emptyCache({0, 0}); });
  m.def("_reset_peak_memory_stats",
        [](int d) { device_allocator().resetPeakStats(d); });
  m.def("_reset_accumulated_memory_stats",
        [](int d) { device_allocator().resetAccumulatedStats(d); });
  m.def("_mem_get_info", [](int d) { return device_allocator().getMemoryInfo(d); });
  // torch.multiprocessing (openneuron/_torch_patches/multiprocessing_sharing.py)
  m.def("_share_tensor_storage", [](const at::Tensor& t) { return share_storage(t.storage()); });
  m.def("_tensor_from_shared_fd", [](int fd, size_t nbytes, int device, at::ScalarType dtype,
                                     std::vector<int64_t> size, std::vector<int64_t> stride,
                                     int64_t offset) {
    auto storage = storage_from_shared_fd(fd, nbytes, static_cast<c10::DeviceIndex>(device));
    auto options = at::TensorOptions().dtype(dtype).device(kNeuron, static_cast<c10::DeviceIndex>(device));
    return at::empty({0}, options).set_(storage, offset, size, stride);
  });
  m.def("_set_memory_fraction", [](double fraction, int d) {
    openneuron::hal::device_allocator(resolve_device_index(d)).set_memory_fraction(fraction);
  });
  m.def("_get_memory_fraction",
        [](int d) { return openneuron::hal::device_allocator(resolve_device_index(d)).memory_fraction(); });
  m.def("_pinned_memory_stats", [] {
    const auto s = openneuron::hal::pinned_allocator().stats();
    py::dict d;
    d["allocated_bytes"] = s.allocated_bytes;
    d["reserved_bytes"] = s.reserved_bytes;
    d["num_host_alloc"] = s.num_host_alloc;
    d["num_host_free"] = s.num_host_free;
    return d;
  });
  m.def("_compiled_kernel", &compiled_kernel);
  m.def("_launch_compiled_kernel", &launch_compiled_kernel, py::arg("kernel"), py::arg("buffers"), py::arg("symbols"),
        py::arg("workgroups") = 0);
  m.def("_empty_compiled_buffer", [](std::vector<int64_t> size, std::vector<int64_t> stride,
                                     at::ScalarType dtype, int64_t device) {
    return empty_compiled_buffer(size, stride, dtype, device);
  });
  m.def("_transfer_stats", &transfer_stats);
  m.def("_reset_transfer_stats", [] { reset_transfer_stats(); });
  m.def("_fallback_report", &fallback_records);
  m.def("_set_sync_debug_mode", [](int mode) { set_sync_debug_mode(mode); });
  m.def("_get_sync_debug_mode", [] { return sync_debug_mode(); });
  m.def("_reset_fallback_report", [] { reset_fallback_report(); });
  m.def("_eager_kernel_report", &eager_kernel_records);
  m.def("_set_eager_fusion", [](bool enabled) { set_eager_fusion(enabled); });
  m.def("_eager_fusion_enabled", [] { return eager_fusion_enabled(); });
  m.def("_flush_held_calls", [] { flush_held_calls(-1); });
  m.def("_eager_fusion_stats", [] {
    const auto s = eager_fusion_stats();
    py::dict d;
    d["held"] = s.held;
    d["chains"] = s.chains;
    d["fused_kernels"] = s.fused_kernels;
    d["fused_calls"] = s.fused_calls;
    d["unfused_chains"] = s.unfused;
    d["awaiting_build"] = s.awaiting_build;
    d["dead_results"] = s.dead_results;
    return d;
  });
  m.def("_reset_eager_fusion_stats", [] { reset_eager_fusion_stats(); });
  m.def("_eager_fusion_builds_pending", [] { return background_builds_pending(); });
  m.def("_wait_for_eager_fusion_builds", [] {
    py::gil_scoped_release no_gil;
    wait_for_background_builds();
  });
  m.def("_stop_eager_fusion_builds", [] {
    py::gil_scoped_release no_gil;
    stop_background_builds();
  });
  m.def("_reset_eager_kernel_report", [] { reset_eager_kernel_report(); });
  m.def("_set_fallback_policy", &set_fallback_policy);
  m.def("_fallback_policy", &fallback_policy);
  m.def("_reload_settings", [] { reload_settings(); });
  m.def("_create_distributed_backend", &create_distributed_backend,
        py::call_guard<py::gil_scoped_release>());
  m.def("_register_distributed_types", &register_distributed_types);
}
