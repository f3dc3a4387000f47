#include "compiler/codegen/glsl_library.h"

namespace openneuron::compiler {

// Each invocation computes a 4x4 block of C in registers from global memory
// (no shared memory and no barriers: on lavapipe a barrier switches every
// invocation of the workgroup, 100x slower than the arithmetic; GPUs cache
// the reused rows). Tuned GPU kernels are issue 29's.
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
//@entry gemm_f32 4 18 64 1 1
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer OnRef_float { float v; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer OnArgs {
  uint64_t b[4];
  int64_t s[18];
};
layout(push_constant) uniform OnPush { OnArgs on_args; };
void main() {
  const uint64_t a = on_args.b[0], bm = on_args.b[1], c = on_args.b[2], x = on_args.b[3];
  const int64_t batch = on_args.s[0], m = on_args.s[1], n = on_args.s[2], k = on_args.s[3];
  const int64_t a_b = on_args.s[4], a_m = on_args.s[5], a_k = on_args.s[6];
  const int64_t b_b = on_args.s[7], b_k = on_args.s[8], b_n = on_args.s[9];
  const int64_t c_b = on_args.s[10], c_m = on_args.s[11], c_n = on_args.s[12];
  const int64_t x_b = on_args.s[13], x_m = on_args.s[14], x_n = on_args.s[15];
  const float alpha = float(on_double_bits(on_args.s[16])), beta = float(on_double_bits(on_args.s[17]));
  const bool use_x = on_args.s[17] != 0L;  // beta == 0 ignores X entirely (its NaNs too), as in BLAS
  const uint64_t S = 4ul, da = uint64_t(a_k) * S, db = uint64_t(b_k) * S;
  const int64_t tm = (m + 3L) / 4L, tn = (n + 3L) / 4L, tiles = batch * tm * tn;
  const int64_t step = int64_t(gl_NumWorkGroups.x) * 64L;
  for (int64_t t = int64_t(gl_GlobalInvocationID.x); t < tiles; t += step) {
    const int64_t bi = t / (tm * tn), rest = t - bi * (tm * tn);
    const int64_t i0 = (rest / tn) * 4L, j0 = (rest - (rest / tn) * tn) * 4L;
    uint64_t pa0 = a + uint64_t(bi * a_b + min(i0 + 0L, m - 1L) * a_m) * S;
    uint64_t pa1 = a + uint64_t(bi * a_b + min(i0 + 1L, m - 1L) * a_m) * S;
    uint64_t pa2 = a + uint64_t(bi * a_b + min(i0 + 2L, m - 1L) * a_m) * S;
    uint64_t pa3 = a + uint64_t(bi * a_b + min(i0 + 3L, m - 1L) * a_m) * S;
    uint64_t pb0 = bm + uint64_t(bi * b_b + min(j0 + 0L, n - 1L) * b_n) * S;
    uint64_t pb1 = bm + uint64_t(bi * b_b + min(j0 + 1L, n - 1L) * b_n) * S;
    uint64_t pb2 = bm + uint64_t(bi * b_b + min(j0 + 2L, n - 1L) * b_n) * S;
    uint64_t pb3 = bm + uint64_t(bi * b_b + min(j0 + 3L, n - 1L) * b_n) * S;
    float c00 = float(0); float c01 = float(0); float c02 = float(0); float c03 = float(0);
    float c10 = float(0); float c11 = float(0); float c12 = float(0); float c13 = float(0);
    float c20 = float(0); float c21 = float(0); float c22 = float(0); float c23 = float(0);
    float c30 = float(0); float c31 = float(0); float c32 = float(0); float c33 = float(0);
    int64_t p = 0L;
    // Four k steps per trip (lavapipe allows an invocation 65535 loop trips in all).
    for (; p + 4L <= k; p += 4L) {
      {
        const float a0 = OnRef_float(pa0).v; const float a1 = OnRef_float(pa1).v; const float a2 = OnRef_float(pa2).v; const float a3 = OnRef_float(pa3).v;
        const float b0 = OnRef_float(pb0).v; const float b1 = OnRef_float(pb1).v; const float b2 = OnRef_float(pb2).v; const float b3 = OnRef_float(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
      {
        const float a0 = OnRef_float(pa0).v; const float a1 = OnRef_float(pa1).v; const float a2 = OnRef_float(pa2).v; const float a3 = OnRef_float(pa3).v;
        const float b0 = OnRef_float(pb0).v; const float b1 = OnRef_float(pb1).v; const float b2 = OnRef_float(pb2).v; const float b3 = OnRef_float(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
      {
        const float a0 = OnRef_float(pa0).v; const float a1 = OnRef_float(pa1).v; const float a2 = OnRef_float(pa2).v; const float a3 = OnRef_float(pa3).v;
        const float b0 = OnRef_float(pb0).v; const float b1 = OnRef_float(pb1).v; const float b2 = OnRef_float(pb2).v; const float b3 = OnRef_float(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
      {
        const float a0 = OnRef_float(pa0).v; const float a1 = OnRef_float(pa1).v; const float a2 = OnRef_float(pa2).v; const float a3 = OnRef_float(pa3).v;
        const float b0 = OnRef_float(pb0).v; const float b1 = OnRef_float(pb1).v; const float b2 = OnRef_float(pb2).v; const float b3 = OnRef_float(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
    }
    for (; p < k; ++p) {
      {
        const float a0 = OnRef_float(pa0).v; const float a1 = OnRef_float(pa1).v; const float a2 = OnRef_float(pa2).v; const float a3 = OnRef_float(pa3).v;
        const float b0 = OnRef_float(pb0).v; const float b1 = OnRef_float(pb1).v; const float b2 = OnRef_float(pb2).v; const float b3 = OnRef_float(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
    }
    if (i0 + 0L < m && j0 + 0L < n) { const int64_t r = i0 + 0L, q = j0 + 0L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c00; }
    if (i0 + 0L < m && j0 + 1L < n) { const int64_t r = i0 + 0L, q = j0 + 1L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c01; }
    if (i0 + 0L < m && j0 + 2L < n) { const int64_t r = i0 + 0L, q = j0 + 2L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c02; }
    if (i0 + 0L < m && j0 + 3L < n) { const int64_t r = i0 + 0L, q = j0 + 3L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c03; }
    if (i0 + 1L < m && j0 + 0L < n) { const int64_t r = i0 + 1L, q = j0 + 0L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c10; }
    if (i0 + 1L < m && j0 + 1L < n) { const int64_t r = i0 + 1L, q = j0 + 1L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c11; }
    if (i0 + 1L < m && j0 + 2L < n) { const int64_t r = i0 + 1L, q = j0 + 2L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c12; }
    if (i0 + 1L < m && j0 + 3L < n) { const int64_t r = i0 + 1L, q = j0 + 3L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c13; }
    if (i0 + 2L < m && j0 + 0L < n) { const int64_t r = i0 + 2L, q = j0 + 0L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c20; }
    if (i0 + 2L < m && j0 + 1L < n) { const int64_t r = i0 + 2L, q = j0 + 1L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c21; }
    if (i0 + 2L < m && j0 + 2L < n) { const int64_t r = i0 + 2L, q = j0 + 2L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c22; }
    if (i0 + 2L < m && j0 + 3L < n) { const int64_t r = i0 + 2L, q = j0 + 3L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c23; }
    if (i0 + 3L < m && j0 + 0L < n) { const int64_t r = i0 + 3L, q = j0 + 0L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c30; }
    if (i0 + 3L < m && j0 + 1L < n) { const int64_t r = i0 + 3L, q = j0 + 1L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c31; }
    if (i0 + 3L < m && j0 + 2L < n) { const int64_t r = i0 + 3L, q = j0 + 2L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c32; }
    if (i0 + 3L < m && j0 + 3L < n) { const int64_t r = i0 + 3L, q = j0 + 3L; OnRef_float(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_float(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : float(0)) + alpha * c33; }
  }
}
//@entry gemm_f64 4 18 64 1 1
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 8) buffer OnRef_double { double v; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer OnArgs {
  uint64_t b[4];
  int64_t s[18];
};
layout(push_constant) uniform OnPush { OnArgs on_args; };
void main() {
  const uint64_t a = on_args.b[0], bm = on_args.b[1], c = on_args.b[2], x = on_args.b[3];
  const int64_t batch = on_args.s[0], m = on_args.s[1], n = on_args.s[2], k = on_args.s[3];
  const int64_t a_b = on_args.s[4], a_m = on_args.s[5], a_k = on_args.s[6];
  const int64_t b_b = on_args.s[7], b_k = on_args.s[8], b_n = on_args.s[9];
  const int64_t c_b = on_args.s[10], c_m = on_args.s[11], c_n = on_args.s[12];
  const int64_t x_b = on_args.s[13], x_m = on_args.s[14], x_n = on_args.s[15];
  const double alpha = double(on_double_bits(on_args.s[16])), beta = double(on_double_bits(on_args.s[17]));
  const bool use_x = on_args.s[17] != 0L;  // beta == 0 ignores X entirely (its NaNs too), as in BLAS
  const uint64_t S = 8ul, da = uint64_t(a_k) * S, db = uint64_t(b_k) * S;
  const int64_t tm = (m + 3L) / 4L, tn = (n + 3L) / 4L, tiles = batch * tm * tn;
  const int64_t step = int64_t(gl_NumWorkGroups.x) * 64L;
  for (int64_t t = int64_t(gl_GlobalInvocationID.x); t < tiles; t += step) {
    const int64_t bi = t / (tm * tn), rest = t - bi * (tm * tn);
    const int64_t i0 = (rest / tn) * 4L, j0 = (rest - (rest / tn) * tn) * 4L;
    uint64_t pa0 = a + uint64_t(bi * a_b + min(i0 + 0L, m - 1L) * a_m) * S;
    uint64_t pa1 = a + uint64_t(bi * a_b + min(i0 + 1L, m - 1L) * a_m) * S;
    uint64_t pa2 = a + uint64_t(bi * a_b + min(i0 + 2L, m - 1L) * a_m) * S;
    uint64_t pa3 = a + uint64_t(bi * a_b + min(i0 + 3L, m - 1L) * a_m) * S;
    uint64_t pb0 = bm + uint64_t(bi * b_b + min(j0 + 0L, n - 1L) * b_n) * S;
    uint64_t pb1 = bm + uint64_t(bi * b_b + min(j0 + 1L, n - 1L) * b_n) * S;
    uint64_t pb2 = bm + uint64_t(bi * b_b + min(j0 + 2L, n - 1L) * b_n) * S;
    uint64_t pb3 = bm + uint64_t(bi * b_b + min(j0 + 3L, n - 1L) * b_n) * S;
    double c00 = double(0); double c01 = double(0); double c02 = double(0); double c03 = double(0);
    double c10 = double(0); double c11 = double(0); double c12 = double(0); double c13 = double(0);
    double c20 = double(0); double c21 = double(0); double c22 = double(0); double c23 = double(0);
    double c30 = double(0); double c31 = double(0); double c32 = double(0); double c33 = double(0);
    int64_t p = 0L;
    // Four k steps per trip (lavapipe allows an invocation 65535 loop trips in all).
    for (; p + 4L <= k; p += 4L) {
      {
        const double a0 = OnRef_double(pa0).v; const double a1 = OnRef_double(pa1).v; const double a2 = OnRef_double(pa2).v; const double a3 = OnRef_double(pa3).v;
        const double b0 = OnRef_double(pb0).v; const double b1 = OnRef_double(pb1).v; const double b2 = OnRef_double(pb2).v; const double b3 = OnRef_double(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
      {
        const double a0 = OnRef_double(pa0).v; const double a1 = OnRef_double(pa1).v; const double a2 = OnRef_double(pa2).v; const double a3 = OnRef_double(pa3).v;
        const double b0 = OnRef_double(pb0).v; const double b1 = OnRef_double(pb1).v; const double b2 = OnRef_double(pb2).v; const double b3 = OnRef_double(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
      {
        const double a0 = OnRef_double(pa0).v; const double a1 = OnRef_double(pa1).v; const double a2 = OnRef_double(pa2).v; const double a3 = OnRef_double(pa3).v;
        const double b0 = OnRef_double(pb0).v; const double b1 = OnRef_double(pb1).v; const double b2 = OnRef_double(pb2).v; const double b3 = OnRef_double(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
      {
        const double a0 = OnRef_double(pa0).v; const double a1 = OnRef_double(pa1).v; const double a2 = OnRef_double(pa2).v; const double a3 = OnRef_double(pa3).v;
        const double b0 = OnRef_double(pb0).v; const double b1 = OnRef_double(pb1).v; const double b2 = OnRef_double(pb2).v; const double b3 = OnRef_double(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
    }
    for (; p < k; ++p) {
      {
        const double a0 = OnRef_double(pa0).v; const double a1 = OnRef_double(pa1).v; const double a2 = OnRef_double(pa2).v; const double a3 = OnRef_double(pa3).v;
        const double b0 = OnRef_double(pb0).v; const double b1 = OnRef_double(pb1).v; const double b2 = OnRef_double(pb2).v; const double b3 = OnRef_double(pb3).v;
        c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
        c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
        c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
        c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
        pa0 += da; pa1 += da; pa2 += da; pa3 += da; pb0 += db; pb1 += db; pb2 += db; pb3 += db;
      }
    }
    if (i0 + 0L < m && j0 + 0L < n) { const int64_t r = i0 + 0L, q = j0 + 0L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c00; }
    if (i0 + 0L < m && j0 + 1L < n) { const int64_t r = i0 + 0L, q = j0 + 1L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c01; }
    if (i0 + 0L < m && j0 + 2L < n) { const int64_t r = i0 + 0L, q = j0 + 2L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c02; }
    if (i0 + 0L < m && j0 + 3L < n) { const int64_t r = i0 + 0L, q = j0 + 3L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c03; }
    if (i0 + 1L < m && j0 + 0L < n) { const int64_t r = i0 + 1L, q = j0 + 0L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c10; }
    if (i0 + 1L < m && j0 + 1L < n) { const int64_t r = i0 + 1L, q = j0 + 1L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c11; }
    if (i0 + 1L < m && j0 + 2L < n) { const int64_t r = i0 + 1L, q = j0 + 2L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c12; }
    if (i0 + 1L < m && j0 + 3L < n) { const int64_t r = i0 + 1L, q = j0 + 3L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c13; }
    if (i0 + 2L < m && j0 + 0L < n) { const int64_t r = i0 + 2L, q = j0 + 0L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c20; }
    if (i0 + 2L < m && j0 + 1L < n) { const int64_t r = i0 + 2L, q = j0 + 1L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c21; }
    if (i0 + 2L < m && j0 + 2L < n) { const int64_t r = i0 + 2L, q = j0 + 2L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c22; }
    if (i0 + 2L < m && j0 + 3L < n) { const int64_t r = i0 + 2L, q = j0 + 3L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c23; }
    if (i0 + 3L < m && j0 + 0L < n) { const int64_t r = i0 + 3L, q = j0 + 0L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c30; }
    if (i0 + 3L < m && j0 + 1L < n) { const int64_t r = i0 + 3L, q = j0 + 1L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c31; }
    if (i0 + 3L < m && j0 + 2L < n) { const int64_t r = i0 + 3L, q = j0 + 2L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c32; }
    if (i0 + 3L < m && j0 + 3L < n) { const int64_t r = i0 + 3L, q = j0 + 3L; OnRef_double(c + uint64_t(bi * c_b + r * c_m + q * c_n) * S).v = (use_x ? beta * OnRef_double(x + uint64_t(bi * x_b + r * x_m + q * x_n) * S).v : double(0)) + alpha * c33; }
  }
}
)GLSL";

}  // namespace openneuron::compiler
