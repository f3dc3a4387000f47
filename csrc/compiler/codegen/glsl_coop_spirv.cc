// The cooperative-matrix gemm's SPIR-V, where the build compiled it
// (spirv/coop_gemm.cmake).
#include <cstdint>
#include <iterator>
#include <vector>

#include "compiler/codegen/glsl_gemm_coop.h"

#ifdef OPENNEURON_COOP_GEMM_SPIRV
#include "gemm_coop_f16.spv.h"
#endif

namespace openneuron::compiler {

const std::vector<uint32_t>& glsl_coop_gemm_spirv() {
#ifdef OPENNEURON_COOP_GEMM_SPIRV
  static const std::vector<uint32_t> words(std::begin(kGemmCoopF16Spirv), std::end(kGemmCoopF16Spirv));
#else
  static const std::vector<uint32_t> words;
#endif
  return words;
}

}  // namespace openneuron::compiler
