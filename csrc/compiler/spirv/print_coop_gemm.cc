// Prints the cooperative-matrix gemm as a whole shader (glsl_gemm_coop.h),
// for the build to compile with glslang >= 13 and embed.
#include <cstdio>

#include "compiler/codegen/glsl_gemm_coop.h"

int main() {
  std::fputs(openneuron::compiler::glsl_coop_gemm_shader().c_str(), stdout);
  return 0;
}
