// Which GLSL gemm entry (glsl_gemm.h) runs a product, and its grid: kept
// apart from the GLSL sources, which build only with Vulkan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace openneuron::compiler {

struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  // The largest element offset within one matrix of any operand (its last
  // element's, strides included): the tiled kernels index in 32 bits.
  int64_t largest_offset = 0;
};

struct GemmLaunch {
  std::string entry;     // without the dtype suffix: "gemm", "gemm_t128", "gemm_t64", "gemm_rows", "gemm_coop"
  int64_t workgroups;    // along x
  // Run as C^T = B^T A^T: A and B swap places, with the scalars of
  // swapped_gemm_scalars (a product with few columns is one with few rows).
  bool swap_operands = false;
};

// Which entry runs a float32 product on a device, and its grid. `tiled`:
// the device runs the tiled kernels (DeviceProperties::tiled_kernels); `compute_units` and `max_workgroups`
// from the device's properties. `sixteen_bit` (float16, bfloat16): the
// tiled kernels or "gemm" (they have no "gemm_rows"). Other dtypes take
// "gemm". `matrix_entry` (float16 only): the matrix-unit kernel
// (float16_matrix_entry), which takes every tiled float16 product.
GemmLaunch gemm_launch(const GemmShape& shape, bool float32, bool tiled, int compute_units,
                       int64_t max_workgroups, bool sixteen_bit = false, const std::string& matrix_entry = "");

// The float16 matrix-unit entry for a device: "gemm_coop" where it has
// cooperative matrices and this build compiled the kernel (glsl_gemm_coop.h),
// "gemm_coop_emulated" where asked to emulate it, else "".
std::string float16_matrix_entry(bool cooperative, bool emulated);

// The gemm scalars (glsl_gemm.h's order) of the transposed product.
std::vector<int64_t> swapped_gemm_scalars(const std::vector<int64_t>& scalars);

}  // namespace openneuron::compiler
