// Source shared by every GLSL kernel: the extensions kernels use and the
// helper functions their expressions call (glsl_pointwise.cc), written so
// results follow IEEE and ATen where GLSL's builtins leave them undefined
// (sqrt and log of negatives, pow of negative bases, integer % of negatives).
#pragma once

namespace openneuron::compiler {

// "#version" and the extensions: the first lines of every kernel.
extern const char* const kGlslHeader;
// Helper functions (after the header and the buffer types).
extern const char* const kGlslPrelude;
// Float64 exp, log, pow, tanh, ... (after the prelude; glsl_prelude_fp64.cc).
extern const char* const kGlslFp64Math;

}  // namespace openneuron::compiler
