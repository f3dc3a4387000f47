// Kernels made by the compiler, as the integration layer runs them: shared
// objects loaded through the HAL (one Executable per library and device),
// launched on the current stream with tensors' device pointers.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace openneuron::integration {

// Returns a handle for entry point `entry` of the library at `path` on
// `device`; loading happens once per (path, device). `label` names its
// launches in profiler traces.
int64_t compiled_kernel(const std::string& path, const std::string& entry, int64_t device,
                        const std::string& label);
// Runs a kernel: `buffers` in the kernel's argument order, `symbols` the
// values of the graph's symbolic sizes; `workgroups` > 0 sets the grid
// (a library kernel that knows its own), else the kernel's target sizes it.
void launch_compiled_kernel(int64_t kernel, const std::vector<at::Tensor>& buffers,
                            const std::vector<int64_t>& symbols, int64_t workgroups = 0);
// A compiled graph's buffer: torch.empty_strided on neuron:`device` without
// the Python argument parser and the dispatcher (one per kernel output).
at::Tensor empty_compiled_buffer(c10::IntArrayRef size, c10::IntArrayRef stride, at::ScalarType dtype,
                                 int64_t device);

}  // namespace openneuron::integration
