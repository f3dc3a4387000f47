#include "compiler/codegen/glsl_prelude.h"

namespace openneuron::compiler {

// GLSL's exp, log, pow, tanh, ... take float32 only. These float64 versions
// (for devices with shaderFloat64) keep float64 ops on the device instead of
// the CPU fallback, never narrowing to float32. Within a few ulp: exp and
// log are reductions plus Taylor/atanh series with enough terms that the
// series' error is below the last bit; the rest are built on them as the
// float32 versions are. Literals carry LF: an unsuffixed one is a float32.
const char* const kGlslFp64Math = R"GLSL(
float on_exp2(float x) { return exp2(x); }
#ifdef ON_FP64
// 2^e for a normal double's exponent range.
double on_pow2(int e) { return packDouble2x32(uvec2(0u, uint(e + 1023) << 20u)); }
// exp: x = n ln2 + r (ln2 split in two, fdlibm's, so n * hi is exact),
// |r| <= ln2 / 2, then the Taylor series to r^13 (the next term is below
// 2^-57); 2^n applied as two factors so subnormal results round once.
double on_exp(double x) {
  if (isnan(x)) return x;
  x = clamp(x, -746.0LF, 710.0LF);
  const double n = roundEven(x * 1.4426950408889634LF);
  // `precise` temporaries, not fma: a driver may fold the two steps into
  // one product by ln2 rounded (lavapipe's NIR does: 100 ulp off near 700).
  precise double n_hi = n * 6.93147180369123816490e-01LF, n_lo = n * 1.90821492927058770002e-10LF;
  precise double r_hi = x - n_hi;
  precise double r = r_hi - n_lo;
  double p = 1.0LF / 6227020800.0LF;  // 1/13!
  p = fma(p, r, 1.0LF / 479001600.0LF);
  p = fma(p, r, 1.0LF / 39916800.0LF);
  p = fma(p, r, 1.0LF / 3628800.0LF);
  p = fma(p, r, 1.0LF / 362880.0LF);
  p = fma(p, r, 1.0LF / 40320.0LF);
  p = fma(p, r, 1.0LF / 5040.0LF);
  p = fma(p, r, 1.0LF / 720.0LF);
  p = fma(p, r, 1.0LF / 120.0LF);
  p = fma(p, r, 1.0LF / 24.0LF);
  p = fma(p, r, 1.0LF / 6.0LF);
  p = fma(p, r, 0.5LF);
  p = fma(p, r * r, r) + 1.0LF;
  const int ni = int(n), half_n = ni >> 1;
  return p * on_pow2(half_n) * on_pow2(ni - half_n);
}
// 2^x: the integer part exactly, exp of the fraction times ln 2.
double on_exp2(double x) {
  if (isnan(x)) return x;
  if (isinf(x)) return x > 0.0LF ? x : 0.0LF;
  x = clamp(x, -1076.0LF, 1025.0LF);
  const double n = roundEven(x);
  const int ni = int(n), half_n = ni >> 1;
  return on_exp((x - n) * 0.6931471805599453LF) * on_pow2(half_n) * on_pow2(ni - half_n);
}
// log: x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) for
// s = (m - 1) / (m + 1), |s| <= 0.1716, the series to s^25.
double on_log(double x) {
  if (isnan(x) || x < 0.0LF) return double(ON_NAN);
  if (x == 0.0LF) return -double(ON_INF);
  if (isinf(x)) return x;
  int shift = 0;
  if (x < 2.2250738585072014e-308LF) {  // subnormal: frexp wants a normal double
    x *= 18014398509481984.0LF;          // 2^54
    shift = 54;
  }
  int e;
  double m = frexp(x, e);
  e -= shift;
  if (m < 0.70710678118654752LF) {
    e -= 1;
    m = m + m;
  }
  const double f = m - 1.0LF, s = f / (2.0LF + f), z = s * s;
  double p = 1.0LF / 25.0LF;
  p = fma(p, z, 1.0LF / 23.0LF);
  p = fma(p, z, 1.0LF / 21.0LF);
  p = fma(p, z, 1.0LF / 19.0LF);
  p = fma(p, z, 1.0LF / 17.0LF);
  p = fma(p, z, 1.0LF / 15.0LF);
  p = fma(p, z, 1.0LF / 13.0LF);
  p = fma(p, z, 1.0LF / 11.0LF);
  p = fma(p, z, 1.0LF / 9.0LF);
  p = fma(p, z, 1.0LF / 7.0LF);
  p = fma(p, z, 1.0LF / 5.0LF);
  p = fma(p, z, 1.0LF / 3.0LF);
  const double fe = double(e), two_s = s + s;
  precise double tail = fma(two_s * z, p, fe * 1.90821492927058770002e-10LF);
  precise double y = fma(fe, 6.93147180369123816490e-01LF, two_s + tail);
  return y;
}
double on_expm1(double x) {
  if (abs(x) < 1e-10LF) return x + 0.5LF * x * x;
  precise double u = on_exp(x);  // Kahan's: (u - 1) * x / log(u)
  if (u == 1.0LF) return x;
  precise double um1 = u - 1.0LF;
  if (um1 == -1.0LF || isinf(u)) return um1;
  return um1 * (x / on_log(u));
}
double on_log2(double x) { return on_log(x) * 1.4426950408889634LF; }
double on_log10(double x) { return on_log(x) * 0.43429448190325182LF; }
double on_log1p(double x) {
  if (isnan(x) || x < -1.0LF) return double(ON_NAN);
  if (x == -1.0LF) return -double(ON_INF);
  if (isinf(x)) return x;
  precise double u = 1.0LF + x;
  precise double um1 = u - 1.0LF;
  return u == 1.0LF ? x : on_log(u) * x / um1;
}
double on_tanh(double x) {
  if (isnan(x)) return x;
  const double a = abs(x);
  if (a > 19.1LF) return sign(x);
  const double e = on_expm1(-2.0LF * a);
  return sign(x) * (-e / (e + 2.0LF));
}
double on_sigmoid(double x) { return 1.0LF / (1.0LF + on_exp(-x)); }
// sinh and cosh from exp(|x|), or past exp's overflow (they overflow
// later) from exp(|x| / 2) squared.
double on_sinh(double x) {
  const double a = abs(x);
  if (a < 1.0LF) { const double e = on_expm1(a); return sign(x) * 0.5LF * (e + e / (e + 1.0LF)); }
  if (a < 709.0LF) { const double e = on_exp(a); return sign(x) * (0.5LF * e - 0.5LF / e); }
  const double h = on_exp(0.5LF * a);
  return sign(x) * (0.5LF * h) * h;
}
double on_cosh(double x) {
  const double a = abs(x);
  if (a < 709.0LF) { const double e = on_exp(a); return 0.5LF * e + 0.5LF / e; }
  const double h = on_exp(0.5LF * a);
  return (0.5LF * h) * h;
}
// m^b for finite m > 0 and finite b, as the float32 version: the integer
// part of b by squaring, the fraction through exp of a small argument.
double on_pow_magnitude(double m, double b) {
  const double bi = trunc(b), bf = b - bi;
  if (abs(bi) > 2147483647.0LF) return on_exp(b * on_log(m));
  double r = 1.0LF, base = m;
  for (uint e = uint(abs(bi)); e != 0u; e >>= 1) {
    if ((e & 1u) != 0u) r *= base;
    base *= base;
  }
  if (bi < 0.0LF) r = 1.0LF / r;
  return bf != 0.0LF ? r * on_exp(bf * on_log(m)) : r;
}
double on_pow(double a, double b) {
  if (b == 0.0LF || a == 1.0LF) return 1.0LF;
  if (isnan(a) || isnan(b)) return double(ON_NAN);
  const bool b_int = b == trunc(b);
  const bool b_odd = b_int && abs(b) < 9007199254740992.0LF && abs(b - 2.0LF * trunc(b * 0.5LF)) == 1.0LF;
  const double m = abs(a);
  if (isinf(b)) return m == 1.0LF ? 1.0LF : ((m < 1.0LF) == (b > 0.0LF)) ? 0.0LF : double(ON_INF);
  if (a < 0.0LF && !b_int && !isinf(a)) return double(ON_NAN);
  double r;
  if (m == 0.0LF) r = b > 0.0LF ? 0.0LF : double(ON_INF);
  else if (isinf(m)) r = b > 0.0LF ? double(ON_INF) : 0.0LF;
  else r = on_pow_magnitude(m, b);
  const bool negative = a < 0.0LF || (a == 0.0LF && (unpackDouble2x32(a).y >> 31) != 0u);
  return negative && b_odd ? -r : r;
}
#endif
)GLSL";

}  // namespace openneuron::compiler
