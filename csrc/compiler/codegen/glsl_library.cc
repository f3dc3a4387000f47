#include "compiler/codegen/glsl_library.h"

namespace openneuron::compiler {

// The 16-step product of a tile is unrolled (no loop there: lavapipe allows
// an invocation 65535 loop trips in all). Neighbouring invocations stage
// neighbouring k of A and n of B: contiguous for row-major operands.
const char* const kGlslLibrarySource = R"GLSL(
// A double's bits as a float, rounded to nearest even, with no float64
// arithmetic (a gemm_f32 must run on devices without it).
float on_double_bits(int64_t bits) {
  const uint64_t u = uint64_t(bits);
  const bool negative = (u >> 63) != 0ul;
  const int e = int((u >> 52) & 0x7fful);
  const uint64_t mant = u & 0xffffffffffffful;
  float r;
  if (e == 0x7ff) {
    r = mant != 0ul ? ON_NAN : ON_INF;
  } else {
    const int fe = e - 1023 + 127;
    if (e == 0 || fe <= 0) {
      r = 0.0;  // (float subnormals flushed: no gemm scale is that small)
    } else {
      uint f = (uint(fe) << 23) | uint(mant >> 29);
      const uint64_t low = mant & 0x1ffffffful, half_way = 0x10000000ul;
      if (low > half_way || (low == half_way && (f & 1u) != 0u)) f += 1u;
      r = fe >= 255 ? ON_INF : uintBitsToFloat(f);
    }
  }
  return negative ? -r : r;
}
//@entry gemm_f32 4 18 256 1 1
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer OnRef_float { float v; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer OnArgs {
  uint64_t b[4];
  int64_t s[18];
};
layout(push_constant) uniform OnPush { OnArgs on_args; };
shared float on_as[16][17];
shared float on_bs[16][17];
float on_ld(uint64_t base, int64_t i) { return OnRef_float(base + uint64_t(i) * 4ul).v; }
void main() {
  const uint64_t a = on_args.b[0], bm = on_args.b[1], c = on_args.b[2], x = on_args.b[3];
  const int64_t batch = on_args.s[0], m = on_args.s[1], n = on_args.s[2], k = on_args.s[3];
  const int64_t a_b = on_args.s[4], a_m = on_args.s[5], a_k = on_args.s[6];
  const int64_t b_b = on_args.s[7], b_k = on_args.s[8], b_n = on_args.s[9];
  const int64_t c_b = on_args.s[10], c_m = on_args.s[11], c_n = on_args.s[12];
  const int64_t x_b = on_args.s[13], x_m = on_args.s[14], x_n = on_args.s[15];
  const float alpha = float(on_double_bits(on_args.s[16])), beta = float(on_double_bits(on_args.s[17]));
  const bool use_x = on_args.s[17] != 0L;  // beta == 0 ignores X entirely (its NaNs too), as in BLAS
  const uint tx = gl_LocalInvocationID.x % 16u, ty = gl_LocalInvocationID.x / 16u;
  const int64_t tm = (m + 15L) / 16L, tn = (n + 15L) / 16L, tiles = batch * tm * tn;
  for (int64_t t = int64_t(gl_WorkGroupID.x); t < tiles; t += int64_t(gl_NumWorkGroups.x)) {
    const int64_t bi = t / (tm * tn), rest = t - bi * (tm * tn);
    const int64_t row = (rest / tn) * 16L + int64_t(ty), col = (rest - (rest / tn) * tn) * 16L + int64_t(tx);
    float acc = float(0);
    for (int64_t p0 = 0L; p0 < k; p0 += 16L) {
      const int64_t pa = p0 + int64_t(tx), pb = p0 + int64_t(ty);
      on_as[ty][tx] = (row < m && pa < k) ? on_ld(a, bi * a_b + row * a_m + pa * a_k) : float(0);
      on_bs[ty][tx] = (pb < k && col < n) ? on_ld(bm, bi * b_b + pb * b_k + col * b_n) : float(0);
      barrier();
      acc += on_as[ty][0] * on_bs[0][tx];
      acc += on_as[ty][1] * on_bs[1][tx];
      acc += on_as[ty][2] * on_bs[2][tx];
      acc += on_as[ty][3] * on_bs[3][tx];
      acc += on_as[ty][4] * on_bs[4][tx];
      acc += on_as[ty][5] * on_bs[5][tx];
      acc += on_as[ty][6] * on_bs[6][tx];
      acc += on_as[ty][7] * on_bs[7][tx];
      acc += on_as[ty][8] * on_bs[8][tx];
      acc += on_as[ty][9] * on_bs[9][tx];
      acc += on_as[ty][10] * on_bs[10][tx];
      acc += on_as[ty][11] * on_bs[11][tx];
      acc += on_as[ty][12] * on_bs[12][tx];
      acc += on_as[ty][13] * on_bs[13][tx];
      acc += on_as[ty][14] * on_bs[14][tx];
      acc += on_as[ty][15] * on_bs[15][tx];
      barrier();
    }
    if (row < m && col < n) {
      const float base = use_x ? beta * on_ld(x, bi * x_b + row * x_m + col * x_n) : float(0);
      OnRef_float(c + uint64_t(bi * c_b + row * c_m + col * c_n) * 4ul).v = base + alpha * acc;
    }
  }
}
//@entry gemm_f64 4 18 256 1 1
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 8) buffer OnRef_double { double v; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer OnArgs {
  uint64_t b[4];
  int64_t s[18];
};
layout(push_constant) uniform OnPush { OnArgs on_args; };
shared double on_as[16][17];
shared double on_bs[16][17];
double on_ld(uint64_t base, int64_t i) { return OnRef_double(base + uint64_t(i) * 8ul).v; }
void main() {
  const uint64_t a = on_args.b[0], bm = on_args.b[1], c = on_args.b[2], x = on_args.b[3];
  const int64_t batch = on_args.s[0], m = on_args.s[1], n = on_args.s[2], k = on_args.s[3];
  const int64_t a_b = on_args.s[4], a_m = on_args.s[5], a_k = on_args.s[6];
  const int64_t b_b = on_args.s[7], b_k = on_args.s[8], b_n = on_args.s[9];
  const int64_t c_b = on_args.s[10], c_m = on_args.s[11], c_n = on_args.s[12];
  const int64_t x_b = on_args.s[13], x_m = on_args.s[14], x_n = on_args.s[15];
  const double alpha = double(on_double_bits(on_args.s[16])), beta = double(on_double_bits(on_args.s[17]));
  const bool use_x = on_args.s[17] != 0L;  // beta == 0 ignores X entirely (its NaNs too), as in BLAS
  const uint tx = gl_LocalInvocationID.x % 16u, ty = gl_LocalInvocationID.x / 16u;
  const int64_t tm = (m + 15L) / 16L, tn = (n + 15L) / 16L, tiles = batch * tm * tn;
  for (int64_t t = int64_t(gl_WorkGroupID.x); t < tiles; t += int64_t(gl_NumWorkGroups.x)) {
    const int64_t bi = t / (tm * tn), rest = t - bi * (tm * tn);
    const int64_t row = (rest / tn) * 16L + int64_t(ty), col = (rest - (rest / tn) * tn) * 16L + int64_t(tx);
    double acc = double(0);
    for (int64_t p0 = 0L; p0 < k; p0 += 16L) {
      const int64_t pa = p0 + int64_t(tx), pb = p0 + int64_t(ty);
      on_as[ty][tx] = (row < m && pa < k) ? on_ld(a, bi * a_b + row * a_m + pa * a_k) : double(0);
      on_bs[ty][tx] = (pb < k && col < n) ? on_ld(bm, bi * b_b + pb * b_k + col * b_n) : double(0);
      barrier();
      acc += on_as[ty][0] * on_bs[0][tx];
      acc += on_as[ty][1] * on_bs[1][tx];
      acc += on_as[ty][2] * on_bs[2][tx];
      acc += on_as[ty][3] * on_bs[3][tx];
      acc += on_as[ty][4] * on_bs[4][tx];
      acc += on_as[ty][5] * on_bs[5][tx];
      acc += on_as[ty][6] * on_bs[6][tx];
      acc += on_as[ty][7] * on_bs[7][tx];
      acc += on_as[ty][8] * on_bs[8][tx];
      acc += on_as[ty][9] * on_bs[9][tx];
      acc += on_as[ty][10] * on_bs[10][tx];
      acc += on_as[ty][11] * on_bs[11][tx];
      acc += on_as[ty][12] * on_bs[12][tx];
      acc += on_as[ty][13] * on_bs[13][tx];
      acc += on_as[ty][14] * on_bs[14][tx];
      acc += on_as[ty][15] * on_bs[15][tx];
      barrier();
    }
    if (row < m && col < n) {
      const double base = use_x ? beta * on_ld(x, bi * x_b + row * x_m + col * x_n) : double(0);
      OnRef_double(c + uint64_t(bi * c_b + row * c_m + col * c_n) * 8ul).v = base + alpha * acc;
    }
  }
}
)GLSL";

}  // namespace openneuron::compiler
