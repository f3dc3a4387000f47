// What opens every GLSL kernel (generated or the library's): kept apart
// from the code generator so the build-time shader tool needs only this.
#pragma once

#include <string>
#include <vector>

namespace openneuron::compiler {

// The kernel's source begins with the line
//   //@entry <name> <bindings> <scalars> <wx> <wy> <wz>
// which the target's build() reads to split a library into shaders.
// What opens every kernel: the //@entry line, the workgroup size, a
// buffer-reference type OnRef_<t> { t v; } per element type in
// `ref_types` (GLSL scalar type names), the arguments block
// (on_args.b[bindings] addresses, on_args.s[scalars]) and its push constant.
std::string glsl_entry_preamble(const std::string& name, int bindings, int scalars, int workgroup_size,
                                const std::vector<std::string>& ref_types);

}  // namespace openneuron::compiler
