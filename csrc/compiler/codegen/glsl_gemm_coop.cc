#include "compiler/codegen/glsl_gemm_coop.h"

#include "compiler/codegen/glsl_entry.h"
#include "compiler/codegen/glsl_gemm.h"
#include "compiler/codegen/glsl_prelude.h"

namespace openneuron::compiler {
namespace {

std::string n(int v) { return std::to_string(v); }

constexpr int kSlice = 32;           // depth of the slices staged in shared memory
constexpr int kRowsA = kSlice + 8;   // shared row lengths, padded by 16 bytes
constexpr int kRowsB = 128 + 8;      // (a matrix load's stride: a multiple of 16 bytes)
constexpr int kLoads = 128 * kSlice / 128;  // elements of each operand per invocation per slice

const char* const kCoopExtensions = R"GLSL(#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
)GLSL";

// Reads this invocation's share of the slice at depth `depth` into la<q>
// and lb<q>: rows (columns) past the edge read the last one (never
// stored), depths past k read zero.
std::string slice_loads(const std::string& depth) {
  std::string s;
  for (int q = 0; q < kLoads; ++q) {
    const std::string i = n(q);
    s += "      { const int d = " + depth + " + ka + " + i + " * dka; la" + i + " = d < ki ? A.v[min(i0 + ra + " + i +
         " * dra, mi - 1) * sa_m + d * sa_k] : float16_t(0.0); }\n";
    s += "      { const int d = " + depth + " + kb + " + i + " * dkb; lb" + i + " = d < ki ? B.v[min(j0 + rb + " + i +
         " * drb, ni - 1) * sb_n + d * sb_k] : float16_t(0.0); }\n";
  }
  return s;
}

// acc<i><j> += A's 16 rows i of this subgroup's quarter x B's 16 columns j,
// over the two 16-deep halves of the slice in shared memory.
std::string multiply(bool emulated) {
  std::string s;
  if (!emulated) {
    for (int kk = 0; kk < kSlice; kk += 16) {
      s += "      {\n";
      for (int i = 0; i < 4; ++i)
        s += "        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a" + n(i) +
             ";\n        coopMatLoad(a" + n(i) + ", on_sa, uint((wm + " + n(16 * i) + ") * " + n(kRowsA) + " + " +
             n(kk) + "), " + n(kRowsA) + "u, gl_CooperativeMatrixLayoutRowMajor);\n";
      for (int j = 0; j < 4; ++j)
        s += "        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b" + n(j) +
             ";\n        coopMatLoad(b" + n(j) + ", on_sb, uint(" + n(kk * kRowsB) + " + wn + " + n(16 * j) + "), " +
             n(kRowsB) + "u, gl_CooperativeMatrixLayoutRowMajor);\n";
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const std::string c = "acc" + n(i) + n(j);
          s += "        " + c + " = coopMatMulAdd(a" + n(i) + ", b" + n(j) + ", " + c + ");\n";
        }
      s += "      }\n";
    }
    return s;
  }
  // Lane l owns elements l + 32 r (r < 8) of each 16x16 result: row
  // (l >> 4) + 2 r, column l & 15.
  s += "      for (int kk = 0; kk < " + n(kSlice) + "; kk += 16)\n";
  s += "        for (int r = 0; r < 8; ++r) {\n";
  s += "          const int row = (lane >> 4) + 2 * r, col = lane & 15;\n";
  for (int i = 0; i < 4; ++i)
    s += "          const int pa" + n(i) + " = (wm + " + n(16 * i) + " + row) * " + n(kRowsA) + " + kk;\n";
  for (int j = 0; j < 4; ++j)
    s += "          const int pb" + n(j) + " = kk * " + n(kRowsB) + " + wn + " + n(16 * j) + " + col;\n";
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) s += "          float s" + n(i) + n(j) + " = acc" + n(i) + n(j) + "[r];\n";
  for (int d = 0; d < 16; ++d) {
    s += "          {\n";
    for (int i = 0; i < 4; ++i)
      s += "            const float a" + n(i) + " = float(on_sa[pa" + n(i) + " + " + n(d) + "]);\n";
    for (int j = 0; j < 4; ++j)
      s += "            const float b" + n(j) + " = float(on_sb[pb" + n(j) + " + " + n(d * kRowsB) + "]);\n";
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) s += "            s" + n(i) + n(j) + " += a" + n(i) + " * b" + n(j) + ";\n";
    s += "          }\n";
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) s += "          acc" + n(i) + n(j) + "[r] = s" + n(i) + n(j) + ";\n";
  s += "        }\n";
  return s;
}

// C = alpha acc + beta X for each 16x16 result, rounded once to float16,
// within C's edges and through its strides. A cooperative matrix's
// elements are spread over its subgroup's lanes in a way only the driver
// knows: it goes through the subgroup's 16x16 of shared memory first.
std::string epilogue(bool emulated) {
  std::string s;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const std::string c = "acc" + n(i) + n(j);
      s += "    {\n";
      if (!emulated)
        s += "      coopMatStore(" + c + ", on_sc, uint(sg * 256), 16u, gl_CooperativeMatrixLayoutRowMajor);\n"
             "      subgroupMemoryBarrierShared();\n      subgroupBarrier();\n";
      s += "      for (int r = 0; r < 8; ++r) {\n";
      s += "        const int e = lane + 32 * r, i = i0 + wm + " + n(16 * i) + " + (e >> 4), j = j0 + wn + " +
           n(16 * j) + " + (e & 15);\n";
      s += "        const float v = " + (emulated ? c + "[r]" : std::string("on_sc[sg * 256 + e]")) + ";\n";
      s += "        if (i < mi && j < ni)\n          C.v[i * sc_m + j * sc_n] = float16_t((use_x ? beta * "
           "float(X.v[i * sx_m + j * sx_n]) : 0.0) + alpha * v);\n";
      s += "      }\n";
      if (!emulated) s += "      subgroupMemoryBarrierShared();\n      subgroupBarrier();  // read before the next store\n";
      s += "    }\n";
    }
  return s;
}

}  // namespace

std::string glsl_coop_gemm_entry(bool emulated) {
  std::string k = glsl_entry_preamble(emulated ? "gemm_coop_emulated_f16" : "gemm_coop_f16", 4, 18, 128, {});
  k += "layout(buffer_reference, std430, buffer_reference_align = 2) buffer OnHalves { float16_t v[]; };\n";
  k += "shared float16_t on_sa[" + n(128 * kRowsA) + "];\n";
  k += "shared float16_t on_sb[" + n(kSlice * kRowsB) + "];\n";
  if (!emulated) k += "shared float on_sc[4 * 256];  // each subgroup's 16x16 results on their way out\n";
  k += "void main() {" + std::string(kGlslGemmArguments);
  k += R"GLSL(  const float alpha = on_double_bits(on_args.s[16]), beta = on_double_bits(on_args.s[17]);
  const int lid = int(gl_LocalInvocationID.x);
)GLSL";
  // The emulation numbers lanes itself; matrix units need the real subgroups
  // (of 32: gemm_launch.h picks this kernel only there).
  k += emulated ? "  const int sg = lid / 32, lane = lid % 32;\n"
                : "  const int sg = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);\n";
  k += R"GLSL(  const int wm = (sg >> 1) * 64, wn = (sg & 1) * 64;  // this subgroup's quarter of the tile
  // 32-bit offsets within a matrix (the launch checked they fit).
  const int sa_m = int(a_m), sa_k = int(a_k), sb_k = int(b_k), sb_n = int(b_n);
  const int sc_m = int(c_m), sc_n = int(c_n), sx_m = int(x_m), sx_n = int(x_n);
  const int mi = int(m), ni = int(n), ki = int(k);
  // Element q of this invocation's share of a slice: A's row ra + q dra at
  // depth ka + q dka, B's column rb + q drb at depth kb + q dkb, so that
  // neighbouring invocations read neighbouring addresses.
  const bool a_rows = a_k == 1L, b_rows = b_n == 1L;
  const int ra = a_rows ? lid / 32 : lid, ka = a_rows ? lid % 32 : 0, dra = a_rows ? 4 : 0, dka = a_rows ? 0 : 1;
  const int rb = b_rows ? lid : lid / 32, kb = b_rows ? 0 : lid % 32, drb = b_rows ? 0 : 4, dkb = b_rows ? 1 : 0;
  const int64_t tm = (m + 127L) / 128L, tn = (n + 127L) / 128L, tiles = batch * tm * tn;
  for (int64_t t = int64_t(gl_WorkGroupID.x); t < tiles; t += int64_t(gl_NumWorkGroups.x)) {
    const int64_t bi = t / (tm * tn), rest = t - bi * (tm * tn);
    const int i0 = int(rest / tn) * 128, j0 = int(rest - (rest / tn) * tn) * 128;
    OnHalves A = OnHalves(a + uint64_t(bi * a_b) * 2ul), B = OnHalves(bm + uint64_t(bi * b_b) * 2ul);
    OnHalves C = OnHalves(c + uint64_t(bi * c_b) * 2ul), X = OnHalves(x + uint64_t(bi * x_b) * 2ul);
)GLSL";
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      k += emulated ? "    float acc" + n(i) + n(j) + "[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);\n"
                    : "    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc" + n(i) + n(j) +
                          " = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);\n";
  for (int q = 0; q < kLoads; ++q) k += "    float16_t la" + n(q) + ", lb" + n(q) + ";\n";
  k += slice_loads("0");
  k += "    for (int k0 = 0; k0 < ki; k0 += " + n(kSlice) + ") {\n";
  k += "      barrier();  // every subgroup is done with the last slice\n";
  for (int q = 0; q < kLoads; ++q) {
    const std::string i = n(q);
    k += "      on_sa[(ra + " + i + " * dra) * " + n(kRowsA) + " + ka + " + i + " * dka] = la" + i + ";\n";
    k += "      on_sb[(kb + " + i + " * dkb) * " + n(kRowsB) + " + rb + " + i + " * drb] = lb" + i + ";\n";
  }
  k += "      barrier();\n      if (k0 + " + n(kSlice) + " < ki) {\n" + slice_loads("k0 + " + n(kSlice)) + "      }\n";
  k += multiply(emulated);
  k += "    }\n";
  k += epilogue(emulated);
  k += "  }\n}\n";
  return k;
}

std::string glsl_coop_gemm_shader() {
  return std::string(kGlslHeader) + kCoopExtensions + kGlslPrelude + glsl_coop_gemm_entry(/*emulated=*/false);
}

}  // namespace openneuron::compiler
