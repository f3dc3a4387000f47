#include "compiler/codegen/glsl_entry.h"

#include <algorithm>

namespace openneuron::compiler {

std::string glsl_entry_preamble(const std::string& name, int bindings, int scalars, int workgroup_size,
                                const std::vector<std::string>& ref_types) {
  const std::string wg = std::to_string(workgroup_size);
  std::string src = "//@entry " + name + " " + std::to_string(bindings) + " " + std::to_string(scalars) + " " +
                    wg + " 1 1\nlayout(local_size_x = " + wg + ") in;\n";
  std::vector<std::string> declared;
  for (const std::string& t : ref_types) {
    if (std::find(declared.begin(), declared.end(), t) != declared.end()) continue;
    declared.push_back(t);
    const int align = t == "double" || t == "int64_t" || t == "uint64_t" ? 8
                      : t == "float" || t == "int32_t" || t == "uint" || t == "int" ? 4
                      : t == "uint8_t" || t == "int8_t" ? 1 : 2;
    src += "layout(buffer_reference, std430, buffer_reference_align = " + std::to_string(align) +
           ") buffer OnRef_" + t + " { " + t + " v; };\n";
  }
  src += "layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer OnArgs {\n";
  src += "  uint64_t b[" + std::to_string(std::max(bindings, 1)) + "];\n";
  src += "  int64_t s[" + std::to_string(std::max(scalars, 1)) + "];\n};\n";
  src += "layout(push_constant) uniform OnPush { OnArgs on_args; };\n";
  return src;
}

}  // namespace openneuron::compiler
