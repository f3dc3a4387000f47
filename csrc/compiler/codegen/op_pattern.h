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

// The pattern of a shift whose IR op names the width (lower.cc:
// "bitwise_shl32", "bitwise_shr31"): the prelude's on_shift_left/right,
// which both targets define; "" for any other op.
inline std::string shift_pattern(const std::string& op) {
  const std::string left = "bitwise_shl", right = "bitwise_shr";
  if (op.rfind(left, 0) == 0) return "on_shift_left($a, $b, " + op.substr(left.size()) + ")";
  if (op.rfind(right, 0) == 0) return "on_shift_right($a, $b, " + op.substr(right.size()) + ")";
  return "";
}

}  // namespace openneuron::compiler
