#include <string>
#include <vector>

#include "compiler/codegen/glsl_kernel.h"
#include "compiler/codegen/glsl_library.h"

namespace openneuron::compiler {
namespace {

// The C++ library's random kernels (cpp_library_random.cc), same entry
// points, arguments and Philox draws, one element per invocation of a
// grid-stride loop. Uniforms are 24-bit floats, as cuRAND's; float64
// normals are not here (GLSL has no float64 log or cos: the op runs on
// the CPU, never in float32), nor are float64 uniforms narrowed: they use
// 53 bits in float64 arithmetic.

struct Type {
  std::string suffix, glsl;
  int bytes;
};

const std::vector<Type>& integer_types() {
  static const std::vector<Type> t = {{"i64", "int64_t", 8}, {"i32", "int32_t", 4}, {"i16", "int16_t", 2},
                                      {"i8", "int8_t", 1},   {"u8", "uint8_t", 1}};
  return t;
}

const Type kF32 = {"f32", "float", 4}, kF64 = {"f64", "double", 8};

// A kernel over out's n elements: `value` is the element's value (as an
// expression of the draw `r`, and `i`), declared after `setup`.
std::string kernel(const std::string& name, const Type& t, int bindings, const std::string& setup,
                   const std::string& value, const std::string& functions = "") {
  const std::string ref = "OnRef_" + t.glsl, bytes = std::to_string(t.bytes);
  const std::string out = bindings == 2 ? "on_args.b[1]" : "on_args.b[0]";
  return glsl_entry_preamble(name + "_" + t.suffix, bindings, 5, 64, {t.glsl}) + functions +
         "void main() {\n"
         "  const int64_t n = on_args.s[0], seed = on_args.s[1], offset = on_args.s[2];\n" +
         setup +
         "  for (int64_t i = int64_t(gl_GlobalInvocationID.x); i < n; i += int64_t(gl_NumWorkGroups.x) * 64L) {\n"
         "    const uvec4 r = on_philox(seed, offset, i);\n"
         "    " + ref + "(" + out + " + uint64_t(i) * " + bytes + "ul).v = " + value + ";\n"
         "  }\n}\n";
}

// randperm: the C++ library's Fisher-Yates in invocation 0 (each swap
// depends on the ones before; callers keep n under the device's loop limit).
std::string permutation_kernel(const Type& t) {
  const std::string ref = "OnRef_" + t.glsl, bytes = std::to_string(t.bytes);
  const auto at = [&](const char* k) { return ref + "(on_args.b[0] + uint64_t(" + k + ") * " + bytes + "ul).v"; };
  return glsl_entry_preamble("random_permutation_" + t.suffix, 1, 5, 64, {t.glsl}) +
         "void main() {\n"
         "  if (gl_GlobalInvocationID.x != 0) return;\n"
         "  const int64_t n = on_args.s[0], seed = on_args.s[1], offset = on_args.s[2];\n"
         "  for (int64_t i = 0; i < n; ++i) " + at("i") + " = " + t.glsl + "(i);\n"
         "  for (int64_t i = n - 1; i > 0; --i) {\n"
         "    const uvec4 r = on_philox(seed, offset, i);\n"
         "    const int64_t j = int64_t(((uint64_t(r.x) << 32) | uint64_t(r.y)) % uint64_t(i + 1));\n"
         "    const " + t.glsl + " v = " + at("i") + ";\n"
         "    " + at("i") + " = " + at("j") + ";\n"
         "    " + at("j") + " = v;\n"
         "  }\n}\n";
}

}  // namespace

const char* const kGlslRandomShared = R"GLSL(
// Philox4x32-10: the draw of element i under key seed at counter (i, offset).
uvec4 on_philox(int64_t seed, int64_t offset, int64_t i) {
  uvec2 k = uvec2(uint(uint64_t(seed)), uint(uint64_t(seed) >> 32));
  uvec4 r = uvec4(uint(uint64_t(i)), uint(uint64_t(i) >> 32), uint(uint64_t(offset)), uint(uint64_t(offset) >> 32));
  for (int round = 0; round < 10; ++round) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, r.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, r.z, hi1, lo1);
    r = uvec4(hi1 ^ r.y ^ k.x, lo1, hi0 ^ r.w ^ k.y, lo0);
    k += uvec2(0x9E3779B9u, 0xBB67AE85u);
  }
  return r;
}
float on_u24(uint x) { return float(x >> 8) * (1.0 / 16777216.0); }
)GLSL";

std::string glsl_random_library_entries() {
  std::string res;
  // uniform: low + u * (high - low), a draw rounding up to high is low.
  res += kernel("random_uniform", kF32, 1,
                "  const float low = on_double_bits(on_args.s[3]), high = on_double_bits(on_args.s[4]);\n",
                "(on_u24(r.x) * (high - low) + low < high ? on_u24(r.x) * (high - low) + low : low)");
  res += kernel("random_uniform", kF64, 1,
                "  const double low = int64BitsToDouble(on_args.s[3]), high = int64BitsToDouble(on_args.s[4]);\n",
                "(on_u53(r) * (high - low) + low < high ? on_u53(r) * (high - low) + low : low)",
                // 53 bits, in the float64 kernel only (a device may lack float64)
                "double on_u53(uvec4 r) {\n"
                "  return double(((uint64_t(r.x) << 32) | uint64_t(r.y)) >> 11) * (1.0LF / 9007199254740992.0LF);\n}\n");
  res += kernel("random_normal", kF32, 1,
                "  const float mean = on_double_bits(on_args.s[3]), std = on_double_bits(on_args.s[4]);\n",
                "sqrt(-2.0 * log(1.0 - on_u24(r.x))) * cos(6.2831853071795864 * on_u24(r.y)) * std + mean");
  const std::string p_scalar = "  const float p = on_double_bits(on_args.s[3]);\n";
  res += kernel("random_bernoulli", kF32, 1, p_scalar, "float(on_u24(r.x) < p)");
  res += kernel("random_bernoulli", kF64, 1, p_scalar, "double(on_u24(r.x) < p)");
  for (const Type& t : integer_types())
    res += kernel("random_bernoulli", t, 1, p_scalar, t.glsl + "(on_u24(r.x) < p ? 1 : 0)");
  for (const Type& t : {kF32, kF64})
    res += kernel("random_bernoulli_tensor", t, 2, "",
                  t.glsl + "(on_u24(r.x) < float(OnRef_" + t.glsl + "(on_args.b[0] + uint64_t(i) * " +
                      std::to_string(t.bytes) + "ul).v))");
  // integers in [from, from + range)
  const std::string range = "  const uint64_t from = uint64_t(on_args.s[3]), range = uint64_t(on_args.s[4]);\n";
  const std::string drawn = "int64_t(from + ((uint64_t(r.x) << 32) | uint64_t(r.y)) % range)";
  for (const Type& t : integer_types()) res += kernel("random_integers", t, 1, range, t.glsl + "(" + drawn + ")");
  res += kernel("random_integers", kF32, 1, range, "float(" + drawn + ")");
  res += kernel("random_integers", kF64, 1, range, "double(" + drawn + ")");
  for (const Type& t : integer_types()) res += permutation_kernel(t);
  res += permutation_kernel(kF32);
  res += permutation_kernel(kF64);
  return res;
}

}  // namespace openneuron::compiler
