#include "compiler/codegen/target.h"

#include "compiler/codegen/cpp_target.h"
#if OPENNEURON_COMPILER_GLSL
#include "compiler/codegen/glsl_target.h"
#endif
#include "compiler/ir/errors.h"

namespace openneuron::compiler {

const Target& find_target(const std::string& name) {
  // A new target adds one line here.
  static const CppTarget cpp;
#if OPENNEURON_COMPILER_GLSL
  static const GlslTarget glsl(/*fp64=*/true), glsl_fp32(/*fp64=*/false);
  static const Target* const targets[] = {&cpp, &glsl, &glsl_fp32};
#else
  static const Target* const targets[] = {&cpp};
#endif
  std::string known;
  for (const Target* t : targets) {
    if (name == t->name()) return *t;
    known += std::string(known.empty() ? "'" : ", '") + t->name() + "'";
  }
  throw CompileError("unknown compiler target '" + name + "'; known targets: " + known);
}

}  // namespace openneuron::compiler
