// The GLSL target's kernel library: hand-written kernels with the same
// entry points and ABI as the C++ target's (cpp_library.h), so the layers
// above call them the same way on every target.
#pragma once

#include <string>

namespace openneuron::compiler {

// Entries (each opening with its "//@entry" line, after the prelude):
// gemm_f32, gemm_f64 -- C[b] = alpha A[b] B[b] + beta X[b], any strides;
// buffers A, B, C, X; scalars batch, m, n, k, the (b, m/k, k/n) strides of
// A, B, C, X, then alpha and beta as the bits of doubles. Each invocation
// computes a 4x4 block of C. Without `fp64` (a device without float64
// shaders) the float64 entries ("_f64") are left out.
std::string glsl_library_source(bool fp64);

// The indexing, scan and loss kernels (glsl_library_indexing.cc): the C++
// library's entries (cpp_library.h) of the same names and arguments, and
// the declarations they share (before the library's first entry).
extern const char* const kGlslIndexingShared;
std::string glsl_indexing_library_entries();

// The random kernels (glsl_library_random.cc): the C++ library's
// (cpp_library_random.cc) entries, and the Philox draw they share.
extern const char* const kGlslRandomShared;
std::string glsl_random_library_entries();

}  // namespace openneuron::compiler
