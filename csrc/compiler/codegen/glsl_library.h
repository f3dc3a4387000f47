// The GLSL target's kernel library: hand-written kernels with the same
// entry points and ABI as the C++ target's (cpp_library.h), so the layers
// above call them the same way on every target.
#pragma once

#include <string>

namespace openneuron::compiler {

// Entries (each opening with its "//@entry" line, after the prelude):
// the matrix products (glsl_gemm.h), the indexing, scan, loss and random
// kernels below. Without `fp64` (a device without float64 shaders) the
// float64 entries ("_f64") are left out.
std::string glsl_library_source(bool fp64);

// The indexing, scan and loss kernels (glsl_library_indexing.cc): the C++
// library's entries (cpp_library.h) of the same names and arguments, and
// the declarations they share (before the library's first entry).
extern const char* const kGlslIndexingShared;
std::string glsl_indexing_library_entries();

// The attention kernels (glsl_attention.cc): attention_fwd_d<32|64|128>_f32
// -- softmax(Q K^T * scale + mask) V with its logsumexp, one pass, head dims
// up to 32, 64 or 128. Buffers Q, K, V, O, logsumexp, mask (any, unread
// without one); scalars B, H, Lq, Lk, D, Dv, the (b, h, l, d) strides of Q,
// K, V, O, the (b, h, l) of logsumexp, the (b, h, i, j) of the mask, the
// scale as a double's bits, causal (keys j <= query i), has_mask.
std::string glsl_attention_library_entries();

// The random kernels (glsl_library_random.cc): the C++ library's
// (cpp_library_random.cc) entries, and the Philox draw they share.
extern const char* const kGlslRandomShared;
std::string glsl_random_library_entries();

}  // namespace openneuron::compiler
