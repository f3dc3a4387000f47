#include "compiler/codegen/target.h"

#include "compiler/codegen/cpp_target.h"
#include "compiler/ir/errors.h"

namespace openneuron::compiler {

const Target& find_target(const std::string& name) {
  // A new target adds one line here.
  static const CppTarget cpp;
  static const Target* const targets[] = {&cpp};
  std::string known;
  for (const Target* t : targets) {
    if (name == t->name()) return *t;
    known += std::string(known.empty() ? "'" : ", '") + t->name() + "'";
  }
  throw CompileError("unknown compiler target '" + name + "'; known targets: " + known);
}

}  // namespace openneuron::compiler
