#include "compiler/codegen/glsl_gemm.h"

#include <algorithm>
#include <string>
#include <utility>

#include "compiler/codegen/glsl_entry.h"
#include "compiler/codegen/glsl_gemm_coop.h"

namespace openneuron::compiler {

// The arguments every gemm entry reads (glsl_gemm.h).
const char* const kGlslGemmArguments = R"GLSL(
  const uint64_t a = on_args.b[0], bm = on_args.b[1], c = on_args.b[2], x = on_args.b[3];
  const int64_t batch = on_args.s[0], m = on_args.s[1], n = on_args.s[2], k = on_args.s[3];
  const int64_t a_b = on_args.s[4], a_m = on_args.s[5], a_k = on_args.s[6];
  const int64_t b_b = on_args.s[7], b_k = on_args.s[8], b_n = on_args.s[9];
  const int64_t c_b = on_args.s[10], c_m = on_args.s[11], c_n = on_args.s[12];
  const int64_t x_b = on_args.s[13], x_m = on_args.s[14], x_n = on_args.s[15];
  const bool use_x = on_args.s[17] != 0L;  // beta == 0 ignores X entirely (its NaNs too), as in BLAS
)GLSL";

namespace {

std::string n(int64_t v) { return std::to_string(v); }

// `s` with each key replaced by its value.
std::string substituted(std::string s, std::initializer_list<std::pair<std::string, std::string>> keys) {
  for (const auto& [key, value] : keys)
    for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + value.size()))
      s.replace(at, key.size(), value);
  return s;
}


// How a product's elements are stored and computed: float32 and float64 as
// themselves; float16, and bfloat16 (its bits in a uint16_t: GLSL has no
// such type), widened to float on load and rounded once on store, as
// ATen's CPU products of them are.
struct Storage {
  std::string type, suffix, size, compute;  // GLSL element type, entry suffix, bytes, accumulator type
  std::string load(const std::string& raw) const {
    return suffix == "f16" ? "float(" + raw + ")" : suffix == "bf16" ? "on_bf16_load(" + raw + ")" : raw;
  }
  std::string store(const std::string& value) const {
    return suffix == "f16" ? "float16_t(" + value + ")" : suffix == "bf16" ? "on_bf16_store(" + value + ")" : value;
  }
};
const Storage kF32{"float", "f32", "4", "float"}, kF64{"double", "f64", "8", "double"},
    kF16{"float16_t", "f16", "2", "float"}, kBF16{"uint16_t", "bf16", "2", "float"};

// gemm_<suffix> over elements stored as `st`. Each invocation computes a
// 4x4 block of C in registers from global memory (no shared memory and no
// barriers). k advances four steps per loop trip (lavapipe allows an
// invocation 65535 loop trips in all).
std::string direct_gemm(const Storage& st) {
  const std::string t = st.compute, ref = "OnRef_" + st.type;
  auto text = [&](const std::string& s) { return substituted(s, {{"$T", t}, {"$R", ref}, {"$S", st.size}}); };
  std::string k = glsl_entry_preamble("gemm_" + st.suffix, 4, 18, 64, {st.type});
  k += "void main() {" + std::string(kGlslGemmArguments);
  k += text(R"GLSL(  const $T alpha = $T(on_double_bits(on_args.s[16])), beta = $T(on_double_bits(on_args.s[17]));
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
    const std::string i = n(q);
    k += "    uint64_t pa" + i + " = a + uint64_t(bi * a_b + min(i0 + " + i + "L, m - 1L) * a_m) * S;\n";
    k += "    uint64_t pb" + i + " = bm + uint64_t(bi * b_b + min(j0 + " + i + "L, n - 1L) * b_n) * S;\n";
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) k += text("    $T c") + n(i) + n(j) + text(" = $T(0);\n");
  std::string step = "      {\n";
  for (int q = 0; q < 4; ++q) {
    const std::string i = n(q);
    step += text("        const $T a") + i + " = " + st.load(text("$R(pa") + i + ").v") + "; pa" + i + " += da;\n";
    step += text("        const $T b") + i + " = " + st.load(text("$R(pb") + i + ").v") + "; pb" + i + " += db;\n";
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) step += "        c" + n(i) + n(j) + " += a" + n(i) + " * b" + n(j) + ";\n";
  step += "      }\n";
  k += "    int64_t p = 0L;\n    for (; p + 4L <= k; p += 4L) {\n" + step + step + step + step + "    }\n";
  k += "    for (; p < k; ++p) {\n" + step + "    }\n";
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const std::string r = "i0 + " + n(i) + "L", q = "j0 + " + n(j) + "L";
      const std::string x = st.load(text("$R(x + uint64_t(bi * x_b + (") + r + ") * x_m + (" + q + ") * x_n) * S).v");
      k += "    if (" + r + " < m && " + q + " < n) " + text("$R(c + uint64_t(bi * c_b + (") + r + ") * c_m + (" +
           q + ") * c_n) * S).v = " + st.store("(use_x ? beta * " + x + text(" : $T(0)) + alpha * c") + n(i) + n(j)) +
           ";\n";
    }
  k += "  }\n}\n";
  return k;
}

// What the tiled kernel's operands are: plain strided matrices, or the
// implicit matrices of a convolution's forward, input gradient or weight
// gradient.
enum class Operands { kGemm, kConv, kConvInputGrad, kConvWeightGrad };

// The implicit matrices, as functions of the depth. conv2d_t*: B is the
// input's columns (one image, C x H x W, contiguous) at depth k = (c, kh,
// kw) for the output pixel whose top-left input coordinates are (ih0, iw0);
// zero in the padding. conv2d_dgrad_t*: A is the weights [o, c, kh, kw]
// seen as [c, (o, kh, kw)], and B the output gradient (one image, O x OH x
// OW) at depth (o, kh, kw) for input pixel (ih, iw): the output pixel that
// tap reached from it, zero where no output pixel did (strides skip some).
// conv2d_wgrad_t*: A is one image's output gradient [o, pixels] (a plain
// matrix), and B the input's columns transposed: at depth p (an output
// pixel) for the column's tap, whose channel offset and tap offsets (less
// the padding) come precomputed.
const char* const kConvLoads = R"GLSL(
float on_conv_column(OnGemmFloats B, int k, int ih0, int iw0, int ki, int kkh, int kkw, int cdh, int cdw, int ch, int cw) {
  if (k >= ki) return 0.0;
  const int taps = kkh * kkw, c = k / taps, r = k - c * taps, kh = r / kkw, kw = r - kh * kkw;
  const int ih = ih0 + kh * cdh, iw = iw0 + kw * cdw;
  return (ih >= 0 && ih < ch && iw >= 0 && iw < cw) ? B.v[(c * ch + ih) * cw + iw] : 0.0;
}
float on_dgrad_weight(OnGemmFloats A, int d, int c, int ki, int taps, int channels) {
  if (d >= ki) return 0.0;
  const int o = d / taps;
  return A.v[(o * channels + c) * taps + d - o * taps];
}
float on_dgrad_output(OnGemmFloats B, int d, int ih, int iw, int ki, int kkh, int kkw, int cdh, int cdw, int csh,
                      int csw, int cph, int cpw, int coh, int cow) {
  if (d >= ki) return 0.0;
  const int taps = kkh * kkw, o = d / taps, t = d - o * taps, kh = t / kkw, kw = t - kh * kkw;
  const int y = ih + cph - kh * cdh, x = iw + cpw - kw * cdw;
  if (y < 0 || x < 0) return 0.0;
  const int oy = y / csh, ox = x / csw;
  return (oy * csh == y && ox * csw == x && oy < coh && ox < cow) ? B.v[(o * coh + oy) * cow + ox] : 0.0;
}
float on_wgrad_column(OnGemmFloats B, int p, int coff, int th, int tw, int ki, int cow, int csh, int csw, int ch,
                      int cw) {
  if (p >= ki) return 0.0;
  const int oy = p / cow, ih = oy * csh + th, iw = (p - oy * cow) * csw + tw;
  return (ih >= 0 && ih < ch && iw >= 0 && iw < cw) ? B.v[coff + ih * cw + iw] : 0.0;
}
)GLSL";

const char* const kConvArguments = R"GLSL(
  const int ch = int(on_args.s[18]), cw = int(on_args.s[19]), cow = int(on_args.s[20]);
  const int kkh = int(on_args.s[21]), kkw = int(on_args.s[22]), csh = int(on_args.s[23]), csw = int(on_args.s[24]);
  const int cph = int(on_args.s[25]), cpw = int(on_args.s[26]), cdh = int(on_args.s[27]), cdw = int(on_args.s[28]);
  const int coh = (ch + 2 * cph - cdh * (kkh - 1) - 1) / csh + 1;
)GLSL";

// What each invocation knows of its q-th load of A (row oa<q>) and B
// (column ob<q>) before the depth loop.
std::string operand_positions(Operands op, const std::string& q) {
  const std::string row = "min(i0 + ra + " + q + " * dra, mi - 1)", col = "min(j0 + rb + " + q + " * drb, ni - 1)";
  std::string s = "    const int oa" + q + " = " + row + (op == Operands::kConvInputGrad ? "" : " * sa_m") +
                  ", ka" + q + " = ka + " + q + " * dka;\n";
  s += "    const int ob" + q + " = " + col + (op == Operands::kGemm ? " * sb_n" : "") + ", kb" + q + " = kb + " + q +
       " * dkb;\n";
  if (op == Operands::kConv)  // the output pixel's top-left input coordinates
    s += "    const int ih" + q + " = (ob" + q + " / cow) * csh - cph, iw" + q + " = (ob" + q + " % cow) * csw - cpw;\n";
  if (op == Operands::kConvInputGrad)  // the input pixel
    s += "    const int ih" + q + " = ob" + q + " / cw, iw" + q + " = ob" + q + " % cw;\n";
  if (op == Operands::kConvWeightGrad)  // the tap: channel offset, tap offsets less the padding
    s += "    const int coff" + q + " = (ob" + q + " / (kkh * kkw)) * ch * cw, th" + q + " = ((ob" + q +
         " % (kkh * kkw)) / kkw) * cdh - cph, tw" + q + " = (ob" + q + " % kkw) * cdw - cpw;\n";
  return s;
}

// The value of A's (B's) q-th load at depth `depth`, as a float.
std::string a_load(Operands op, const Storage& st, const std::string& q, const std::string& depth) {
  if (op == Operands::kConvInputGrad) return "on_dgrad_weight(A, " + depth + ", oa" + q + ", ki, kkh * kkw, mi)";
  return depth + " < ki ? " + st.load("A.v[oa" + q + " + (" + depth + ") * sa_k]") + " : 0.0";
}
std::string b_load(Operands op, const Storage& st, const std::string& q, const std::string& depth) {
  if (op == Operands::kConv)
    return "on_conv_column(B, " + depth + ", ih" + q + ", iw" + q + ", ki, kkh, kkw, cdh, cdw, ch, cw)";
  if (op == Operands::kConvInputGrad)
    return "on_dgrad_output(B, " + depth + ", ih" + q + ", iw" + q +
           ", ki, kkh, kkw, cdh, cdw, csh, csw, cph, cpw, coh, cow)";
  if (op == Operands::kConvWeightGrad)
    return "on_wgrad_column(B, " + depth + ", coff" + q + ", th" + q + ", tw" + q + ", ki, cow, csh, csw, ch, cw)";
  return depth + " < ki ? " + st.load("B.v[ob" + q + " + (" + depth + ") * sb_k]") + " : 0.0";
}

// gemm_t<tile>_f32: a workgroup of 256 invocations (16 x 16) computes one
// tile x tile block of C at a time. Each 16-deep slice of A and B goes
// through shared memory, loaded along the operand's contiguous dim (rows of
// a row-major A, columns of a transposed one) so neighbouring invocations
// read neighbouring addresses; the next slice is read into registers while
// this one is multiplied. Invocation (tx, ty) owns rows 64g + 4ty + r and
// columns 64h + 4tx + c (g, h < tile / 64; r, c < 4): its reads of shared
// memory are whole vec4s, and the 16 invocations of a row read 16
// consecutive vec4s. Shared rows are padded by one vec4 against bank
// conflicts on the stores.
//
// conv2d_t<tile>_f32 is the same kernel as an implicit GEMM: C[b] = W
// cols(input[b]) + bias, where the columns matrix (depth c*kh*kw, column
// oh*ow) is never written: each load of B computes its input coordinates,
// and reads zero in the padding. conv2d_dgrad_t<tile>_f32 likewise gives
// the input's gradient, C[b] = W' grad_output'[b], and conv2d_wgrad_t* one
// image's share of the weights' gradient, C[b] = grad_output[b] cols[b]^T
// (kConvLoads). Their scalars are the gemm's (batch = images; forward: m =
// output channels, n = output pixels, k = C*KH*KW; input gradient: m =
// input channels, n = input pixels, k = O*KH*KW; weight gradient: m =
// output channels, n = C*KH*KW, k = output pixels; B's batch stride is an
// image's) and then H, W, OW, KH, KW, stride, padding and dilation
// (height, width each).
std::string tiled_gemm(int tile, Operands op, const Storage& st = kF32) {
  const int per = tile / 16;           // rows (and columns) per invocation
  const int groups = per / 4;          // vec4 groups of them
  const int loads = tile * 16 / 256;   // elements of each operand per invocation per slice
  const bool conv = op != Operands::kGemm;
  const std::string name = op == Operands::kGemm            ? "gemm_t"
                           : op == Operands::kConv          ? "conv2d_t"
                           : op == Operands::kConvInputGrad ? "conv2d_dgrad_t"
                                                            : "conv2d_wgrad_t";
  std::string k = glsl_entry_preamble(name + n(tile) + "_" + st.suffix, 4, conv ? 29 : 18, 256, {});
  k += "layout(buffer_reference, std430, buffer_reference_align = " + st.size + ") buffer OnGemmFloats { " + st.type +
       " v[]; };\n";
  k += "shared vec4 on_as[16][" + n(tile / 4 + 1) + "];\nshared vec4 on_bs[16][" + n(tile / 4 + 1) + "];\n";
  if (conv) k += kConvLoads;
  k += "void main() {" + std::string(kGlslGemmArguments);
  if (conv) k += kConvArguments;
  k += substituted(R"GLSL(  const float alpha = on_double_bits(on_args.s[16]), beta = on_double_bits(on_args.s[17]);
  const int lid = int(gl_LocalInvocationID.x), tx = lid % 16, ty = lid / 16;
  const int64_t tm = (m + $TL - 1L) / $TL, tn = (n + $TL - 1L) / $TL, tiles = batch * tm * tn;
  // 32-bit offsets within a matrix (the launch checked they fit).
  const int sa_m = int(a_m), sa_k = int(a_k), sb_k = int(b_k), sb_n = int(b_n);
  const int sc_m = int(c_m), sc_n = int(c_n), sx_m = int(x_m), sx_n = int(x_n);
  const int mi = int(m), ni = int(n), ki = int(k);
  // What this invocation loads of each slice: element q sits at row
  // ra + q * dra, depth ka + q * dka of A's tile (likewise for B).
  const bool a_rows = $AROWS, b_rows = $BROWS;
  const int ra = a_rows ? lid / 16 : lid % $T, ka = a_rows ? lid % 16 : lid / $T;
  const int dra = a_rows ? 16 : 0, dka = a_rows ? 0 : 256 / $T;
  const int rb = b_rows ? lid % $T : lid / 16, kb = b_rows ? lid / $T : lid % 16;
  const int drb = b_rows ? 0 : 16, dkb = b_rows ? 256 / $T : 0;
  for (int64_t t = int64_t(gl_WorkGroupID.x); t < tiles; t += int64_t(gl_NumWorkGroups.x)) {
    const int64_t bi = t / (tm * tn), rest = t - bi * (tm * tn);
    const int i0 = int(rest / tn) * $T, j0 = int(rest - (rest / tn) * tn) * $T;
    OnGemmFloats A = OnGemmFloats(a + uint64_t(bi * a_b) * $Sul), B = OnGemmFloats(bm + uint64_t(bi * b_b) * $Sul);
    OnGemmFloats C = OnGemmFloats(c + uint64_t(bi * c_b) * $Sul), X = OnGemmFloats(x + uint64_t(bi * x_b) * $Sul);
)GLSL", {{"$TL", n(tile) + "L"}, {"$T", n(tile)}, {"$S", st.size}, {"$AROWS", conv ? "true" : "a_k == 1L"},
                                   {"$BROWS", op == Operands::kGemm ? "b_n == 1L" : op == Operands::kConvWeightGrad ? "false" : "true"}});
  // Rows and columns past the edge load the last one (never stored);
  // depths past k load zero.
  for (int q = 0; q < loads; ++q) {
    const std::string s = n(q);
    k += operand_positions(op, s);
    k += "    float la" + s + " = " + a_load(op, st, s, "ka" + s) + ";\n";
    k += "    float lb" + s + " = " + b_load(op, st, s, "kb" + s) + ";\n";
  }
  for (int r = 0; r < per; ++r)
    for (int h = 0; h < groups; ++h) k += "    vec4 c" + n(r) + "_" + n(h) + " = vec4(0.0);\n";
  k += "    for (int k0 = 0; k0 < ki; k0 += 16) {\n      barrier();  // every invocation is done with the last slice\n";
  for (int q = 0; q < loads; ++q) {
    const std::string s = n(q);
    k += "      { const int r = ra + " + s + " * dra; on_as[ka" + s + "][r >> 2][r & 3] = la" + s + "; }\n";
    k += "      { const int r = rb + " + s + " * drb; on_bs[kb" + s + "][r >> 2][r & 3] = lb" + s + "; }\n";
  }
  k += "      barrier();\n      if (k0 + 16 < ki) {\n";
  for (int q = 0; q < loads; ++q) {
    const std::string s = n(q);
    const std::string next_a = "k0 + 16 + ka" + s, next_b = "k0 + 16 + kb" + s;
    k += "        la" + s + " = " + a_load(op, st, s, next_a) + ";\n";
    k += "        lb" + s + " = " + b_load(op, st, s, next_b) + ";\n";
  }
  k += "      }\n";
  for (int d = 0; d < 16; ++d) {
    const std::string s = n(d);
    k += "      {\n";
    for (int g = 0; g < groups; ++g)
      k += "        const vec4 a" + n(g) + " = on_as[" + s + "][" + n(g * 16) + " + ty];\n";
    for (int h = 0; h < groups; ++h)
      k += "        const vec4 b" + n(h) + " = on_bs[" + s + "][" + n(h * 16) + " + tx];\n";
    for (int r = 0; r < per; ++r)
      for (int h = 0; h < groups; ++h)
        k += "        c" + n(r) + "_" + n(h) + " += a" + n(r / 4) + "[" + n(r % 4) + "] * b" + n(h) + ";\n";
    k += "      }\n";
  }
  k += "    }\n";
  for (int r = 0; r < per; ++r) {
    const std::string row = "i0 + " + n(64 * (r / 4) + r % 4) + " + 4 * ty";
    k += "    if (" + row + " < mi) {\n      const int i = " + row + ";\n";
    for (int h = 0; h < groups; ++h)
      for (int c = 0; c < 4; ++c) {
        const std::string col = "j0 + " + n(64 * h + c) + " + 4 * tx";
        const std::string x = st.load("X.v[i * sx_m + (" + col + ") * sx_n]");
        k += "      if (" + col + " < ni) C.v[i * sc_m + (" + col + ") * sc_n] = " +
             st.store("(use_x ? beta * " + x + " : 0.0) + alpha * c" + n(r) + "_" + n(h) + "[" + n(c) + "]") + ";\n";
      }
    k += "    }\n";
  }
  k += "  }\n}\n";
  return k;
}

// gemm_rows_f32: products with few rows (a decode step's tokens, a matrix-
// vector product). A workgroup computes a set of C's columns, four rows at
// a time, its invocations splitting k: 8 columns x 32 lanes when B's
// columns are contiguous along k (a linear layer's weight, B = W^T), else
// 64 columns x 4 lanes, so neighbouring invocations read neighbouring
// elements of B either way. The lanes' partial sums meet in shared memory.
std::string rows_gemm() {
  std::string k = glsl_entry_preamble("gemm_rows_f32", 4, 18, 256, {});
  k += "layout(buffer_reference, std430, buffer_reference_align = 4) buffer OnGemmFloats { float v[]; };\n";
  k += "shared float on_part[4][256];\n";
  k += "void main() {" + std::string(kGlslGemmArguments);
  k += R"GLSL(  const float alpha = on_double_bits(on_args.s[16]), beta = on_double_bits(on_args.s[17]);
  const int lid = int(gl_LocalInvocationID.x);
  const bool split_k = b_k == 1L;
  const int cols = split_k ? 8 : 64, lanes = 256 / cols;
  const int col = split_k ? lid / 32 : lid % 64, lane = split_k ? lid % 32 : lid / 64;
  const int partner_step = split_k ? 1 : 64;  // from a lane to the next
  // 32-bit offsets within a matrix (the launch checked they fit).
  const int sa_m = int(a_m), sa_k = int(a_k), sb_k = int(b_k), sb_n = int(b_n);
  const int sc_m = int(c_m), sc_n = int(c_n), sx_m = int(x_m), sx_n = int(x_n);
  const int mi = int(m), ni = int(n), ki = int(k);
  const int64_t tn = (n + int64_t(cols) - 1L) / int64_t(cols), groups = batch * tn;
  for (int64_t g = int64_t(gl_WorkGroupID.x); g < groups; g += int64_t(gl_NumWorkGroups.x)) {
    const int64_t bi = g / tn;
    const int j = int(g - bi * tn) * cols + col, jc = min(j, ni - 1);  // past the edge: the last column, not stored
    OnGemmFloats A = OnGemmFloats(a + uint64_t(bi * a_b) * 4ul), B = OnGemmFloats(bm + uint64_t(bi * b_b) * 4ul);
    OnGemmFloats C = OnGemmFloats(c + uint64_t(bi * c_b) * 4ul), X = OnGemmFloats(x + uint64_t(bi * x_b) * 4ul);
    for (int i0 = 0; i0 < mi; i0 += 4) {
      const int o0 = i0 * sa_m, o1 = min(i0 + 1, mi - 1) * sa_m, o2 = min(i0 + 2, mi - 1) * sa_m,
                o3 = min(i0 + 3, mi - 1) * sa_m;
      float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
      for (int p = lane; p < ki; p += lanes) {
        const float bv = B.v[p * sb_k + jc * sb_n];
        const int pa = p * sa_k;
        s0 += A.v[o0 + pa] * bv;
        s1 += A.v[o1 + pa] * bv;
        s2 += A.v[o2 + pa] * bv;
        s3 += A.v[o3 + pa] * bv;
      }
      on_part[0][lid] = s0;
      on_part[1][lid] = s1;
      on_part[2][lid] = s2;
      on_part[3][lid] = s3;
      for (int s = lanes / 2; s > 0; s >>= 1) {
        barrier();
        if (lane < s) {
          const int other = lid + s * partner_step;
          for (int q = 0; q < 4; ++q) on_part[q][lid] += on_part[q][other];
        }
      }
      barrier();
      if (lane == 0 && j < ni)
        for (int q = 0; q < 4 && i0 + q < mi; ++q) {
          const int i = i0 + q;
          C.v[i * sc_m + j * sc_n] = (use_x ? beta * X.v[i * sx_m + j * sx_n] : 0.0) + alpha * on_part[q][lid];
        }
      barrier();  // every lane is done with the partial sums
    }
  }
}
)GLSL";
  return k;
}

}  // namespace

std::string glsl_gemm_entries() {
  std::string entries = rows_gemm();
  for (const Storage* st : {&kF32, &kF64, &kF16, &kBF16}) entries += direct_gemm(*st);
  for (Operands op : {Operands::kGemm, Operands::kConv, Operands::kConvInputGrad, Operands::kConvWeightGrad})
    entries += tiled_gemm(128, op) + tiled_gemm(64, op);
  for (const Storage* st : {&kF16, &kBF16}) entries += tiled_gemm(128, Operands::kGemm, *st) + tiled_gemm(64, Operands::kGemm, *st);
  // The cooperative-matrix variant is compiled at build time (glslang 12
  // cannot): GlslTarget::build adds it.
  return entries + glsl_coop_gemm_entry(/*emulated=*/true);
}

}  // namespace openneuron::compiler
