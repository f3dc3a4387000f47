// The C++ target's kernel library: hand-written kernels for ops the
// compiler does not generate (matmul), as C++ source built like generated
// kernels (the system compiler, this machine's flags, the kernel cache), so
// the CPU drivers load it as one more executable.
#pragma once

namespace openneuron::compiler {

// Entry points: gemm_f32, gemm_f64 (see the source for their arguments).
extern const char* const kCppLibrarySource;
// Indexing, scan and loss kernels (cpp_library_indexing.cc): index_select,
// gather, scatter, embedding_backward, nll_loss_forward/backward, scan,
// arg_extreme, ramp; one entry per dtype (_f32, _i64, ...) or element size (_e4).
extern const char* const kCppIndexingLibrarySource;
// Random kernels (cpp_library_random.cc): random_uniform, random_normal,
// random_bernoulli, random_bernoulli_tensor, random_integers; Philox draws.
extern const char* const kCppRandomLibrarySource;

}  // namespace openneuron::compiler
