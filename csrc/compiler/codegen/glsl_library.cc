#include "compiler/codegen/glsl_library.h"

#include "compiler/codegen/glsl_kernel.h"

#include <string>

namespace openneuron::compiler {
namespace {

// gemm_<suffix> over elements of GLSL type `t`. Each invocation computes a
// 4x4 block of C in registers from global memory (no shared memory and no
// barriers: on lavapipe a barrier switches every invocation of the
// workgroup, 100x slower than the arithmetic; GPUs cache the reused rows).
// k advances four steps per loop trip (lavapipe allows an invocation 65535
// loop trips in all). Tuned GPU kernels are issue 29's.
std::string gemm_kernel(const std::string& t, const std::string& suffix) {
  const std::string size = t == "double" ? "8" : "4", ref = "OnRef_" + t;
  auto text = [&](std::string s) {  // $T type, $R reference type, $S size
    for (auto [key, value] : {std::pair<std::string, std::string>{"$T", t}, {"$R", ref}, {"$S", size}})
      for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size()))
        s.replace(at, key.size(), value);
    return s;
  };
  std::string k = glsl_entry_preamble("gemm_" + suffix, 4, 18, 64, {t});
  k += text(R"GLSL(void main() {
  const uint64_t a = on_args.b[0], bm = on_args.b[1], c = on_args.b[2], x = on_args.b[3];
  const int64_t batch = on_args.s[0], m = on_args.s[1], n = on_args.s[2], k = on_args.s[3];
  const int64_t a_b = on_args.s[4], a_m = on_args.s[5], a_k = on_args.s[6];
  const int64_t b_b = on_args.s[7], b_k = on_args.s[8], b_n = on_args.s[9];
  const int64_t c_b = on_args.s[10], c_m = on_args.s[11], c_n = on_args.s[12];
  const int64_t x_b = on_args.s[13], x_m = on_args.s[14], x_n = on_args.s[15];
  const $T alpha = $T(on_double_bits(on_args.s[16])), beta = $T(on_double_bits(on_args.s[17]));
  const bool use_x = on_args.s[17] != 0L;  // beta == 0 ignores X entirely (its NaNs too), as in BLAS
  const uint64_t S = $Sul, da = uint64_t(a_k) * S, db = uint64_t(b_k) * S;
  const int64_t tm = (m + 3L) / 4L, tn = (n + 3L) / 4L, tiles = batch * tm * tn;
  const int64_t step = int64_t(gl_NumWorkGroups.x) * 64L;
  for (int64_t t = int64_t(gl_GlobalInvocationID.x); t < tiles; t += step) {
    const int64_t bi = t / (tm * tn), rest = t - bi * (tm * tn);
    const int64_t i0 = (rest / tn) * 4L, j0 = (rest - (rest / tn) * tn) * 4L;
)GLSL");
  // Rows and columns past the edge read the last one (loads stay in range;
  // their results are not stored).
  for (int q = 0; q < 4; ++q) {
    const std::string i = std::to_string(q);
    k += "    uint64_t pa" + i + " = a + uint64_t(bi * a_b + min(i0 + " + i + "L, m - 1L) * a_m) * S;\n";
    k += "    uint64_t pb" + i + " = bm + uint64_t(bi * b_b + min(j0 + " + i + "L, n - 1L) * b_n) * S;\n";
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) k += text("    $T c") + std::to_string(i) + std::to_string(j) + text(" = $T(0);\n");
  std::string step = "      {\n";
  for (int q = 0; q < 4; ++q) {
    const std::string i = std::to_string(q);
    step += text("        const $T a") + i + text(" = $R(pa") + i + ").v; pa" + i + " += da;\n";
    step += text("        const $T b") + i + text(" = $R(pb") + i + ").v; pb" + i + " += db;\n";
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const std::string ij = std::to_string(i) + std::to_string(j);
      step += "        c" + ij + " += a" + std::to_string(i) + " * b" + std::to_string(j) + ";\n";
    }
  step += "      }\n";
  k += "    int64_t p = 0L;\n    for (; p + 4L <= k; p += 4L) {\n" + step + step + step + step + "    }\n";
  k += "    for (; p < k; ++p) {\n" + step + "    }\n";
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const std::string r = "i0 + " + std::to_string(i) + "L", q = "j0 + " + std::to_string(j) + "L";
      k += "    if (" + r + " < m && " + q + " < n) " +
           text("$R(c + uint64_t(bi * c_b + (") + r + ") * c_m + (" + q + ") * c_n) * S).v = " +
           text("(use_x ? beta * $R(x + uint64_t(bi * x_b + (") + r + ") * x_m + (" + q +
           ") * x_n) * S).v : " + text("$T(0)) + alpha * c") + std::to_string(i) + std::to_string(j) + ";\n";
    }
  k += "  }\n}\n";
  return k;
}

}  // namespace

std::string glsl_library_source(bool fp64) {
  const std::string all = std::string(kGlslIndexingShared) + kGlslRandomShared + gemm_kernel("float", "f32") +
         gemm_kernel("double", "f64") + glsl_indexing_library_entries() + glsl_random_library_entries();
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
