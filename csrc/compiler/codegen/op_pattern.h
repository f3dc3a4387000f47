// Op patterns of the code generators ("on_exp($a)", "($a + $b)"): $a, $b,
// $c are the operands, $t the compute type.
#pragma once

#include <string>

namespace openneuron::compiler {

inline std::string fill_op_pattern(const std::string& pattern, const std::string& ct, const std::string& a,
                                   const std::string& b, const std::string& c) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '$' && i + 1 < pattern.size()) {
      char k = pattern[++i];
      out += k == 'a' ? a : k == 'b' ? b : k == 'c' ? c : k == 't' ? ct : "$";
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace openneuron::compiler
