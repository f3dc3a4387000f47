#include "compiler/codegen/glsl_library.h"

#include "compiler/codegen/glsl_gemm.h"

#include <string>

namespace openneuron::compiler {

std::string glsl_library_source(bool fp64) {
  const std::string all = std::string(kGlslIndexingShared) + kGlslRandomShared + glsl_gemm_entries() +
                          glsl_indexing_library_entries() + glsl_random_library_entries() +
                          glsl_attention_library_entries();
  if (fp64) return all;
  // Without float64 shaders: every entry but the float64 ones ("_f64"),
  // whose ops then take another route (never narrowed).
  const std::string marker = "//@entry ";
  size_t at = all.find(marker);
  std::string kept = all.substr(0, at);
  while (at != std::string::npos) {
    const size_t next = all.find(marker, at + marker.size());
    const std::string entry = all.substr(at, next == std::string::npos ? std::string::npos : next - at);
    const std::string name = entry.substr(marker.size(), entry.find(' ', marker.size()) - marker.size());
    if (name.size() < 4 || name.compare(name.size() - 4, 4, "_f64") != 0) kept += entry;
    at = next;
  }
  return kept;
}

}  // namespace openneuron::compiler
