#include "compiler/codegen/glsl_library.h"

#include <string>

#include "compiler/codegen/glsl_kernel.h"

namespace openneuron::compiler {
namespace {

std::string n(int v) { return std::to_string(v); }

constexpr int kKeysPerTile = 16;

// attention_fwd_d<dmax>_f32: one invocation per query row, 64 rows per
// workgroup; tiles of 16 keys and their values go through shared memory,
// and each row keeps a running maximum, sum and weighted value sum (the
// online softmax of FlashAttention), so scores never reach memory. Loops
// over the head dim are unrolled to dmax (dims past the real one are
// zeros): the row's query and accumulator stay in registers, and lavapipe's
// limit on loop trips counts only tiles and keys.
std::string attention_forward(int dmax) {
  std::string k = glsl_entry_preamble("attention_fwd_d" + n(dmax) + "_f32", 6, 32, 64, {});
  k += "layout(buffer_reference, std430, buffer_reference_align = 4) buffer OnAttnFloats { float v[]; };\n";
  k += "shared float on_k[" + n(kKeysPerTile) + "][" + n(dmax) + "];\n";
  k += "shared float on_v[" + n(kKeysPerTile) + "][" + n(dmax) + "];\n";
  k += R"GLSL(void main() {
  const uint64_t q = on_args.b[0], kk = on_args.b[1], vv = on_args.b[2], o = on_args.b[3], lse = on_args.b[4],
                 mask = on_args.b[5];
  const int64_t B = on_args.s[0], H = on_args.s[1], Lq = on_args.s[2], Lk = on_args.s[3];
  const int D = int(on_args.s[4]), Dv = int(on_args.s[5]);
  const int64_t q_b = on_args.s[6], q_h = on_args.s[7], q_l = on_args.s[8], q_d = on_args.s[9];
  const int64_t k_b = on_args.s[10], k_h = on_args.s[11], k_l = on_args.s[12], k_d = on_args.s[13];
  const int64_t v_b = on_args.s[14], v_h = on_args.s[15], v_l = on_args.s[16], v_d = on_args.s[17];
  const int64_t o_b = on_args.s[18], o_h = on_args.s[19], o_l = on_args.s[20], o_d = on_args.s[21];
  const int64_t l_b = on_args.s[22], l_h = on_args.s[23], l_l = on_args.s[24];
  const int64_t m_b = on_args.s[25], m_h = on_args.s[26], m_i = on_args.s[27], m_j = on_args.s[28];
  const float scale = on_double_bits(on_args.s[29]);
  const bool causal = on_args.s[30] != 0L, has_mask = on_args.s[31] != 0L;
  const int lid = int(gl_LocalInvocationID.x);
  const int64_t blocks = (Lq + 63L) / 64L, groups = B * H * blocks;
  for (int64_t g = int64_t(gl_WorkGroupID.x); g < groups; g += int64_t(gl_NumWorkGroups.x)) {
    const int64_t bh = g / blocks, bi = bh / H, hi = bh - bi * H, i0 = (g - bh * blocks) * 64L;
    const int64_t i = i0 + int64_t(lid), ic = min(i, Lq - 1L);
    const bool live = i < Lq;
    // Keys past the block's last query are hidden from all of it (causal).
    const int64_t last_key = causal ? min(Lk, min(i0 + 64L, Lq)) : Lk;
    OnAttnFloats Q = OnAttnFloats(q + uint64_t(bi * q_b + hi * q_h + ic * q_l) * 4ul);
    const uint64_t k_rows = kk + uint64_t(bi * k_b + hi * k_h) * 4ul, v_rows = vv + uint64_t(bi * v_b + hi * v_h) * 4ul;
    const int qd = int(q_d), kd = int(k_d), vd = int(v_d);
)GLSL";
  for (int d = 0; d < dmax; ++d)
    k += "    const float q" + n(d) + " = " + n(d) + " < D ? Q.v[" + n(d) + " * qd] : 0.0;\n";
  for (int d = 0; d < dmax; ++d) k += "    float a" + n(d) + " = 0.0;\n";
  k += "    float row_max = -ON_INF, row_sum = 0.0;\n";
  k += "    for (int64_t j0 = 0L; j0 < last_key; j0 += " + n(kKeysPerTile) + "L) {\n";
  k += "      barrier();  // every row is done with the last tile\n";
  const int loads = kKeysPerTile * dmax / 64;
  for (int e = 0; e < loads; ++e) {
    k += "      { const int e = lid + " + n(e * 64) + ", t = e / " + n(dmax) + ", d = e - t * " + n(dmax) +
         "; const int64_t j = j0 + int64_t(t);\n";
    k += "        on_k[t][d] = j < Lk && d < D ? OnAttnFloats(k_rows + uint64_t(j * k_l) * 4ul).v[d * kd] : 0.0;\n";
    k += "        on_v[t][d] = j < Lk && d < Dv ? OnAttnFloats(v_rows + uint64_t(j * v_l) * 4ul).v[d * vd] : 0.0; }\n";
  }
  k += "      barrier();\n";
  k += "      for (int t = 0; t < " + n(kKeysPerTile) + " && live; ++t) {\n";
  k += "        const int64_t j = j0 + int64_t(t);\n";
  k += "        if (j >= Lk || (causal && j > i)) break;\n";
  k += "        float s = 0.0;\n";
  for (int d = 0; d < dmax; ++d) k += "        s += q" + n(d) + " * on_k[t][" + n(d) + "];\n";
  k += R"GLSL(        s *= scale;
        if (has_mask) s += OnAttnFloats(mask + uint64_t(bi * m_b + hi * m_h + i * m_i + j * m_j) * 4ul).v[0];
        if (s == -ON_INF) continue;  // a hidden key
        const float new_max = max(row_max, s), rescale = on_exp(row_max - new_max), p = on_exp(s - new_max);
        row_sum = row_sum * rescale + p;
        row_max = new_max;
)GLSL";
  for (int d = 0; d < dmax; ++d)
    k += "        a" + n(d) + " = a" + n(d) + " * rescale + p * on_v[t][" + n(d) + "];\n";
  k += "      }\n    }\n";
  // A row that sees no key attends to nothing: zeros (PyTorch's safe
  // softmax), logsumexp -inf.
  k += "    if (live) {\n";
  k += "      OnAttnFloats O = OnAttnFloats(o + uint64_t(bi * o_b + hi * o_h + i * o_l) * 4ul);\n";
  k += "      const int od = int(o_d);\n";
  k += "      const float inv = row_sum > 0.0 ? 1.0 / row_sum : 0.0;\n";
  for (int d = 0; d < dmax; ++d) k += "      if (" + n(d) + " < Dv) O.v[" + n(d) + " * od] = a" + n(d) + " * inv;\n";
  k += "      OnAttnFloats(lse + uint64_t(bi * l_b + hi * l_h + i * l_l) * 4ul).v[0] =\n";
  k += "          row_sum > 0.0 ? row_max + on_log(row_sum) : -ON_INF;\n";
  k += "    }\n  }\n}\n";
  return k;
}

}  // namespace

std::string glsl_attention_library_entries() {
  std::string all;
  for (int dmax : {32, 64, 128}) all += attention_forward(dmax);
  return all;
}

}  // namespace openneuron::compiler
