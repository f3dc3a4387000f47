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
  static const GlslTarget glsl;
  static const Target* const targets[] = {&cpp, &glsl};
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
