#include "compiler/codegen/glsl_prelude.h"

namespace openneuron::compiler {

const char* const kGlslHeader = R"GLSL(#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
)GLSL";

const char* const kGlslPrelude = R"GLSL(
#define ON_NAN uintBitsToFloat(0x7fc00000u)
#define ON_INF uintBitsToFloat(0x7f800000u)

// A double's bits as a float, rounded to nearest even, with no float64
// arithmetic (float kernels must run on devices without it:
// a gemm_f32, a Python number's value on a device without float64).
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
    if (fe <= 0) {
      // A float subnormal: the 53-bit significand shifted down, rounded to
      // nearest even (below half the smallest one, and double subnormals: 0).
      const int shift = 30 - fe;
      if (e == 0 || shift > 54) {
        r = 0.0;
      } else {
        const uint64_t full = mant | 0x10000000000000ul, low = full & ((1ul << uint64_t(shift)) - 1ul);
        uint f = uint(full >> uint64_t(shift));
        const uint64_t half_way = 1ul << uint64_t(shift - 1);
        if (low > half_way || (low == half_way && (f & 1u) != 0u)) f += 1u;
        r = uintBitsToFloat(f);
      }
    } else {
      uint f = (uint(fe) << 23) | uint(mant >> 29);
      const uint64_t low = mant & 0x1ffffffful, half_way = 0x10000000ul;
      if (low > half_way || (low == half_way && (f & 1u) != 0u)) f += 1u;
      r = fe >= 255 ? ON_INF : uintBitsToFloat(f);
    }
  }
  return negative ? -r : r;
}
// A double's bits as an integer, truncated (no float64 arithmetic).
int64_t on_double_bits_int(int64_t bits) {
  const uint64_t u = uint64_t(bits);
  const int e = int((u >> 52) & 0x7fful) - 1075;
  if (((u >> 52) & 0x7fful) == 0ul) return 0L;
  const uint64_t mant = (u & 0xffffffffffffful) | 0x10000000000000ul;
  const uint64_t r = e >= 0 ? (e < 11 ? mant << uint64_t(e) : 0ul) : (e > -53 ? mant >> uint64_t(-e) : 0ul);
  return (u >> 63) != 0ul ? -int64_t(r) : int64_t(r);
}
int64_t on_sext32(int32_t v) { return (int64_t(uint32_t(v)) ^ 0x80000000L) - 0x80000000L; }

// Integer division rounding down, and the matching remainder; written with
// truncating division only (GLSL leaves % of negative operands undefined).
int64_t on_floordiv(int64_t a, int64_t b) {
  const int64_t q = a / b, r = a - q * b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
int64_t on_mod(int64_t a, int64_t b) {
  const int64_t r = a - (a / b) * b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

bool on_abs(bool a) { return a; }
int64_t on_abs(int64_t a) { return a < 0 ? -a : a; }
float on_abs(float a) { return abs(a); }
#ifdef ON_FP64
double on_abs(double a) { return abs(a); }
#endif

// Division rounded as IEEE requires: drivers may compute a / b as
// a * (1 / b) (lavapipe does), an ulp off. The residual a - q * b is found
// exactly with Dekker's product (no fma: a driver may split it into a
// multiply and an add, as lavapipe does) and corrects the quotient.
float on_div(float a, float b) {
  precise float q = a / b;
  if (isinf(q) || isnan(q) || q == 0.0 || isinf(b) || abs(q) > 1e30 || abs(b) > 1e30 ||
      abs(q) < 1e-30 || abs(b) < 1e-30)
    return q;
  precise float cq = 4097.0 * q;
  precise float qh = cq - (cq - q);
  precise float ql = q - qh;
  precise float cb = 4097.0 * b;
  precise float bh = cb - (cb - b);
  precise float bl = b - bh;
  precise float p = q * b;
  precise float e = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl;
  precise float r = (a - p) - e;
  precise float result = q + r / b;
  return result;
}
#ifdef ON_FP64
double on_div(double a, double b) { return a / b; }
#endif
int64_t on_div(int64_t a, int64_t b) { return a / b; }

int64_t on_sign(int64_t a) { return int64_t(a > 0) - int64_t(a < 0); }
float on_sign(float a) { return float(a > 0.0) - float(a < 0.0); }  // NaN: 0, as ATen
#ifdef ON_FP64
double on_sign(double a) { return double(a > 0.0LF) - double(a < 0.0LF); }
#endif

int64_t on_maximum(int64_t a, int64_t b) { return a > b ? a : b; }
float on_maximum(float a, float b) { return (isnan(a) || a > b) ? a : b; }
#ifdef ON_FP64
double on_maximum(double a, double b) { return (isnan(a) || a > b) ? a : b; }
#endif
bool on_maximum(bool a, bool b) { return a || b; }
int64_t on_minimum(int64_t a, int64_t b) { return a < b ? a : b; }
float on_minimum(float a, float b) { return (isnan(a) || a < b) ? a : b; }
#ifdef ON_FP64
double on_minimum(double a, double b) { return (isnan(a) || a < b) ? a : b; }
#endif
bool on_minimum(bool a, bool b) { return a && b; }

int64_t on_floor(int64_t a) { return a; }
float on_floor(float a) { return floor(a); }
#ifdef ON_FP64
double on_floor(double a) { return floor(a); }
#endif
int64_t on_ceil(int64_t a) { return a; }
float on_ceil(float a) { return ceil(a); }
#ifdef ON_FP64
double on_ceil(double a) { return ceil(a); }
#endif
int64_t on_trunc(int64_t a) { return a; }
float on_trunc(float a) { return trunc(a); }
#ifdef ON_FP64
double on_trunc(double a) { return trunc(a); }
#endif
int64_t on_round(int64_t a) { return a; }
float on_round(float a) { return roundEven(a); }
#ifdef ON_FP64
double on_round(double a) { return roundEven(a); }
#endif

// exp within 1 ulp (Cephes' polynomial after a Cody-Waite reduction, as the
// C++ target's): GLSL's exp may be 3 + 2|x| ulp off.
float on_exp(float x) {
  if (isnan(x)) return x;
  x = clamp(x, -104.0, 89.0);
  const float n = roundEven(x * 1.44269504088896341);
  // `precise` temporaries, not fma: a driver may fold the two steps into
  // one product by ln2 rounded (lavapipe's NIR does: 68 ulp off near -72).
  precise float n_hi = n * 0.693359375, n_lo = n * 2.12194440e-4;
  precise float r_hi = x - n_hi;
  precise float r = r_hi + n_lo;
  float p = 1.9875691500e-4;
  p = fma(p, r, 1.3981999507e-3);
  p = fma(p, r, 8.3334519073e-3);
  p = fma(p, r, 4.1665795894e-2);
  p = fma(p, r, 1.6666665459e-1);
  p = fma(p, r, 5.0000001201e-1);
  p = fma(p, r * r, r) + 1.0;
  const int ni = int(n), half_n = ni / 2;
  return p * intBitsToFloat((half_n + 127) << 23) * intBitsToFloat((ni - half_n + 127) << 23);
}
// log within about 1 ulp (Cephes' logf): drivers' log may be far coarser
// (lavapipe's is off by 1e-5 near 1).
float on_log(float x) {
  if (isnan(x) || x < 0.0) return ON_NAN;
  if (x == 0.0) return -ON_INF;
  if (isinf(x)) return x;
  int e;
  float m = frexp(x, e);
  if (m < 0.70710678118654752) {
    e -= 1;
    m = m + m - 1.0;
  } else {
    m = m - 1.0;
  }
  const float z = m * m;
  float y = 7.0376836292E-2;
  y = fma(y, m, -1.1514610310E-1);
  y = fma(y, m, 1.1676998740E-1);
  y = fma(y, m, -1.2420140846E-1);
  y = fma(y, m, 1.4249322787E-1);
  y = fma(y, m, -1.6668057665E-1);
  y = fma(y, m, 2.0000714765E-1);
  y = fma(y, m, -2.4999993993E-1);
  y = fma(y, m, 3.3333331174E-1);
  y = y * m * z;
  precise float fe = float(e);
  precise float y_lo = y - fe * 2.12194440e-4;  // kept apart from fe * 0.693359375 (see on_exp)
  precise float y_z = y_lo - 0.5 * z;
  precise float lg = fe * 0.693359375 + (m + y_z);
  return lg;
}
float on_expm1(float x) {
  if (abs(x) < 1e-5) return x + 0.5 * x * x;
  // `precise` keeps u - 1 from being folded back into x (the trick's point).
  precise float u = on_exp(x);
  if (u == 1.0) return x;
  precise float um1 = u - 1.0;
  if (um1 == -1.0 || isinf(u)) return um1;
  return um1 * (x / on_log(u));  // x / log(u) ~ 1: no overflow of um1 * x near 88
}
float on_log2(float x) { return on_log(x) * 1.4426950408889634; }
float on_log10(float x) { return on_log(x) * 0.43429448190325176; }
float on_log1p(float x) {
  if (isnan(x) || x < -1.0) return ON_NAN;
  if (x == -1.0) return -ON_INF;
  if (isinf(x)) return x;
  precise float u = 1.0 + x;
  precise float um1 = u - 1.0;
  return u == 1.0 ? x : on_log(u) * x / um1;
}
float on_sqrt(float x) { return x < 0.0 ? ON_NAN : sqrt(x); }
#ifdef ON_FP64
double on_sqrt(double x) { return x < 0.0LF ? double(ON_NAN) : sqrt(x); }
#endif
float on_tanh(float x) {
  if (isnan(x)) return x;
  const float a = abs(x);
  if (a > 9.0) return sign(x);
  const float e = on_expm1(-2.0 * a);
  return sign(x) * (-e / (e + 2.0));
}
float on_sigmoid(float x) { return 1.0 / (1.0 + on_exp(-x)); }
// asin and atan within a few ulp (Cephes' asinf, atanf).
float on_asin(float x) {
  const float a = abs(x);
  if (isnan(x) || a > 1.0) return ON_NAN;
  if (a < 1e-4) return x;
  float z, r;
  const bool upper = a > 0.5;
  if (upper) {
    z = 0.5 * (1.0 - a);
    r = sqrt(z);
  } else {
    r = a;
    z = a * a;
  }
  float p = 4.2163199048E-2;
  p = fma(p, z, 2.4181311049E-2);
  p = fma(p, z, 4.5470025998E-2);
  p = fma(p, z, 7.4953002686E-2);
  p = fma(p, z, 1.6666752422E-1);
  float y = fma(p * z, r, r);
  if (upper) y = 1.5707963267948966 - (y + y);
  return x < 0.0 ? -y : y;
}
float on_acos(float x) {
  if (isnan(x) || abs(x) > 1.0) return ON_NAN;
  if (x < -0.5) return 3.14159265358979 - 2.0 * on_asin(sqrt(0.5 * (1.0 + x)));
  if (x > 0.5) return 2.0 * on_asin(sqrt(0.5 * (1.0 - x)));
  return 1.5707963267948966 - on_asin(x);
}
float on_atan(float x) {
  if (isnan(x)) return x;
  float a = abs(x), base = 0.0;
  if (a > 2.414213562373095) {
    base = 1.5707963267948966;
    a = -1.0 / a;
  } else if (a > 0.4142135623730950) {
    base = 0.78539816339744831;
    a = (a - 1.0) / (a + 1.0);
  }
  const float z = a * a;
  float p = 8.05374449538e-2;
  p = fma(p, z, -1.38776856032E-1);
  p = fma(p, z, 1.99777106478E-1);
  p = fma(p, z, -3.33329491539E-1);
  const float y = base + fma(p * z, a, a);
  return x < 0.0 ? -y : y;
}
float on_acosh(float x) {
  if (isnan(x) || x < 1.0) return ON_NAN;
  if (x > 1e18) return on_log(x) + 0.6931471805599453;
  precise float t = x - 1.0;
  return on_log1p(t + sqrt(t * (x + 1.0)));
}
float on_asinh(float x) {
  const float a = abs(x);
  return sign(x) * (a > 1e18 ? on_log(a) + 0.6931471805599453 : on_log1p(a + a * a / (1.0 + sqrt(1.0 + a * a))));
}
// Odd: computed at |x|, where log1p's argument is positive (no cancellation).
float on_atanh(float x) {
  const float a = abs(x);
  if (isnan(x) || a > 1.0) return ON_NAN;
  const float y = 0.5 * on_log1p(2.0 * a / (1.0 - a));
  return x < 0.0 ? -y : y;
}
// sinh and cosh from exp(|x|), or past exp's overflow (they overflow
// later) from exp(|x| / 2) squared.
float on_sinh(float x) {
  const float a = abs(x);
  if (a < 1.0) { const float e = on_expm1(a); return sign(x) * 0.5 * (e + e / (e + 1.0)); }
  if (a < 88.0) { const float e = on_exp(a); return sign(x) * (0.5 * e - 0.5 / e); }
  const float h = on_exp(0.5 * a);
  return sign(x) * (0.5 * h) * h;
}
float on_cosh(float x) {
  const float a = abs(x);
  if (a < 88.0) { const float e = on_exp(a); return 0.5 * e + 0.5 / e; }
  const float h = on_exp(0.5 * a);
  return (0.5 * h) * h;
}
// erfc with fractional error below 1.2e-7 everywhere (Numerical Recipes'
// Chebyshev fit); erf from a Taylor series near 0, where erfc loses digits.
float on_erfc(float x) {
  if (isnan(x)) return x;
  const float z = abs(x), t = 1.0 / (1.0 + 0.5 * z);
  float p = 0.17087277;
  p = fma(p, t, -0.82215223);
  p = fma(p, t, 1.48851587);
  p = fma(p, t, -1.13520398);
  p = fma(p, t, 0.27886807);
  p = fma(p, t, -0.18628806);
  p = fma(p, t, 0.09678418);
  p = fma(p, t, 0.37409196);
  p = fma(p, t, 1.00002368);
  p = fma(p, t, -1.26551223);
  const float r = t * on_exp(-z * z + p);
  return x >= 0.0 ? r : 2.0 - r;
}
float on_erf(float x) {
  if (abs(x) < 0.5) {
    const float x2 = x * x;
    float s = -1.0 / 75600.0;  // x^13 / (6! * 13) ... Taylor terms of erf * sqrt(pi) / 2
    s = fma(s, x2, 1.0 / 9360.0);
    s = fma(s, x2, -1.0 / 1320.0);
    s = fma(s, x2, 1.0 / 216.0);
    s = fma(s, x2, -1.0 / 42.0);
    s = fma(s, x2, 1.0 / 10.0);
    s = fma(s, x2, -1.0 / 3.0);
    s = fma(s, x2, 1.0);
    return 1.1283791670955126 * x * s;
  }
  return 1.0 - on_erfc(x);
}
// m^b for finite m > 0 and finite b: the integer part of b by squaring
// (a few roundings), the fraction through exp2 of a small argument, so the
// error does not grow with the result's exponent as exp2(b * log2(m)) does.
float on_pow_magnitude(float m, float b) {
  const float bi = trunc(b), bf = b - bi;
  if (abs(bi) > 16777216.0) return exp2(b * on_log2(m));
  float r = 1.0, base = m;
  for (uint e = uint(abs(bi)); e != 0u; e >>= 1) {
    if ((e & 1u) != 0u) r *= base;
    base *= base;
  }
  if (bi < 0.0) r = 1.0 / r;
  return bf != 0.0 ? r * exp2(bf * on_log2(m)) : r;
}
// pow as C's: exact 1 for a zero exponent or a base of one, signed results
// for negative bases and odd integer exponents, NaN for negative bases and
// fractional exponents (GLSL's pow is undefined there).
float on_pow(float a, float b) {
  if (b == 0.0 || a == 1.0) return 1.0;
  if (isnan(a) || isnan(b)) return ON_NAN;
  const bool b_int = b == trunc(b);
  const bool b_odd = b_int && abs(b) < 16777216.0 && abs(b - 2.0 * trunc(b * 0.5)) == 1.0;
  const float m = abs(a);
  if (isinf(b)) return m == 1.0 ? 1.0 : ((m < 1.0) == (b > 0.0)) ? 0.0 : ON_INF;
  if (a < 0.0 && !b_int && !isinf(a)) return ON_NAN;
  float r;
  if (m == 0.0) r = b > 0.0 ? 0.0 : ON_INF;
  else if (isinf(m)) r = b > 0.0 ? ON_INF : 0.0;
  else r = on_pow_magnitude(m, b);
  const bool negative = a < 0.0 || (a == 0.0 && floatBitsToUint(a) != 0u);
  return negative && b_odd ? -r : r;
}
// Integer pow as ATen: by squaring, wrapping on overflow; negative
// exponents give 0 except for bases 1 and -1.
int64_t on_pow(int64_t a, int64_t b) {
  if (int(b >> 32) < 0) {  // b < 0 (lavapipe mis-compiles that form here)
    if (a == 1L) return 1L;
    if (a == -1L) return (b & 1L) != 0L ? -1L : 1L;
    return 0L;
  }
  uint64_t result = 1ul, base = uint64_t(a);
  for (uint64_t e = uint64_t(b); e != 0ul; e >>= 1ul) {
    if ((e & 1ul) != 0ul) result *= base;
    base *= base;
  }
  return int64_t(result);
}
// sqrt(a^2 + b^2) without overflow or underflow on the way (the larger
// magnitude factored out); infinity wins over NaN, as C's hypot.
float on_hypot(float a, float b) {
  a = abs(a);
  b = abs(b);
  if (isinf(a) || isinf(b)) return ON_INF;
  if (isnan(a) || isnan(b)) return ON_NAN;
  const float big = max(a, b), small = min(a, b);
  if (big == 0.0) return 0.0;
  const float r = small / big;
  return big * sqrt(1.0 + r * r);
}
// log Gamma(2 + z) for |z| <= 0.5 from its Taylor series at 2 (the
// coefficients are (-1)^k (zeta(k) - 1) / k past the linear 1 - gamma):
// exactly 0 at z = 0, so lgamma's roots at 1 and 2 come out as zeros.
float on_lgamma_near_2(float z) {
  float p = -9.439488275268397e-06;
  p = fma(p, z, 2.050721277567069e-05);
  p = fma(p, z, -4.492623673813314e-05);
  p = fma(p, z, 9.945751278180853e-05);
  p = fma(p, z, -2.2315475845357939e-04);
  p = fma(p, z, 5.096695247430425e-04);
  p = fma(p, z, -1.192753911703261e-03);
  p = fma(p, z, 2.8905103307415234e-03);
  p = fma(p, z, -7.385551028673986e-03);
  p = fma(p, z, 2.0580808427784546e-02);
  p = fma(p, z, -6.73523010531981e-02);
  p = fma(p, z, 0.3224670334241132);
  p = fma(p, z, 0.42278433509846713);
  return p * z;
}
// log|Gamma(x)| for x > 0: near 1 and 2 from the series at 2 (with
// Gamma(x + 1) = x Gamma(x)); from 2.5, moved up to 8 by the same
// recurrence, then Stirling's series.
float on_lgamma_positive(float x) {
  if (x < 0.5) return on_lgamma_near_2(x) - on_log1p(x) - on_log(x);
  if (x < 1.5) return on_lgamma_near_2(x - 1.0) - on_log1p(x - 1.0);
  if (x < 2.5) return on_lgamma_near_2(x - 2.0);
  float shift = 1.0;
  while (x < 8.0) {
    shift *= x;
    x += 1.0;
  }
  const float z = 1.0 / (x * x);
  float s = fma(z, -1.0 / 1680.0, 1.0 / 1260.0);
  s = fma(s, z, -1.0 / 360.0);
  s = fma(s, z, 1.0 / 12.0);
  return (x - 0.5) * on_log(x) - x + 0.918938533204673 + s / x - on_log(shift);
}
// log|Gamma(x)|; x <= 0 by the reflection formula, sin(pi x) taken from
// x's (exact) distance to the nearest integer, so poles stay poles.
float on_lgamma(float x) {
  if (isnan(x)) return x;
  if (isinf(x)) return ON_INF;
  if (x > 0.0) return on_lgamma_positive(x);
  const float f = x - roundEven(x);
  if (f == 0.0) return ON_INF;
  return on_log(3.14159265358979 / abs(sin(3.14159265358979 * f))) - on_lgamma_positive(1.0 - x);
}
// digamma by the CPU's algorithm (Cephes'): moved up to 10 by
// psi(x) = psi(x + 1) - 1 / x, then the asymptotic series; negative x by
// reflection, with pi / tan(pi r) of x's fraction r.
float on_digamma(float x) {
  if (x == 0.0) return (floatBitsToUint(x) >> 31) != 0u ? ON_INF : -ON_INF;
  float reflection = 0.0;
  if (x < 0.0) {
    if (x == trunc(x)) return ON_NAN;
    reflection = 3.14159265358979 / tan(3.14159265358979 * (x - roundEven(x)));  // tan has period pi: the nearest integer keeps the argument small
    x = 1.0 - x;
  }
  float result = 0.0;
  while (x < 10.0) {
    result -= 1.0 / x;
    x += 1.0;
  }
  if (x == 10.0) return result + 2.25175258906672110764 - reflection;
  float y = 0.0;
  if (x < 1.0e17) {
    const float z = 1.0 / (x * x);
    float p = fma(z, 1.0 / 12.0, -691.0 / 32760.0);
    p = fma(p, z, 1.0 / 132.0);
    p = fma(p, z, -1.0 / 240.0);
    p = fma(p, z, 1.0 / 252.0);
    p = fma(p, z, -1.0 / 120.0);
    p = fma(p, z, 1.0 / 12.0);
    y = z * p;
  }
  return result + on_log(x) - 0.5 / x - y - reflection;
}
// The inverse error function by the CPU's algorithm: a rational first
// guess (Pavlis' central and tail fits), then two Newton steps on erf.
float on_erfinv(float y) {
  const float a = abs(y);
  if (isnan(y) || a > 1.0) return ON_NAN;
  if (a == 1.0) return y > 0.0 ? ON_INF : -ON_INF;
  float x;
  if (a <= 0.7) {
    const float z = y * y;
    const float num = fma(fma(fma(-0.140543331, z, 0.914624893), z, -1.645349621), z, 0.886226899);
    const float den = fma(fma(fma(fma(0.012229801, z, -0.329097515), z, 1.442710462), z, -2.118377725), z, 1.0);
    x = y * num / den;
  } else {
    const float z = sqrt(-on_log((1.0 - a) * 0.5));
    const float num = fma(fma(fma(1.641345311, z, 3.429567803), z, -1.624906493), z, -1.970840454);
    const float den = fma(fma(1.637067800, z, 3.543889200), z, 1.0);
    x = (y < 0.0 ? -num : num) / den;
  }
  x -= (on_erf(x) - y) / (1.1283791670955126 * on_exp(-x * x));
  x -= (on_erf(x) - y) / (1.1283791670955126 * on_exp(-x * x));
  return x;
}
float on_fmod(float a, float b) { return b == 0.0 || isinf(a) ? ON_NAN : isinf(b) ? a : a - b * trunc(a / b); }
#ifdef ON_FP64
double on_fmod(double a, double b) { return b == 0.0LF ? double(ON_NAN) : a - b * trunc(a / b); }
#endif
int64_t on_fmod(int64_t a, int64_t b) { return a - (a / b) * b; }
float on_remainder(float a, float b) {
  const float r = on_fmod(a, b);
  return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;
}
#ifdef ON_FP64
double on_remainder(double a, double b) {
  const double r = on_fmod(a, b);
  return (r != 0.0LF && ((r < 0.0LF) != (b < 0.0LF))) ? r + b : r;
}
#endif
int64_t on_remainder(int64_t a, int64_t b) { return on_mod(a, b); }
float on_div_trunc(float a, float b) { return trunc(a / b); }
#ifdef ON_FP64
double on_div_trunc(double a, double b) { return trunc(a / b); }
#endif
int64_t on_div_trunc(int64_t a, int64_t b) { return a / b; }
float on_div_floor(float a, float b) {
  if (b == 0.0) return a / b;
  const float m = on_fmod(a, b);
  float d = (a - m) / b;
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) d -= 1.0;
  if (d == 0.0) return (a / b) < 0.0 ? -0.0 : 0.0;
  const float f = floor(d);
  return (d - f > 0.5) ? f + 1.0 : f;
}
#ifdef ON_FP64
double on_div_floor(double a, double b) { return b == 0.0LF ? a / b : floor(a / b); }
#endif
int64_t on_div_floor(int64_t a, int64_t b) { return on_floordiv(a, b); }
int64_t on_bitwise_not(int64_t a) { return ~a; }
bool on_bitwise_not(bool a) { return !a; }
int64_t on_bitwise_and(int64_t a, int64_t b) { return a & b; }
bool on_bitwise_and(bool a, bool b) { return a && b; }
int64_t on_bitwise_or(int64_t a, int64_t b) { return a | b; }
bool on_bitwise_or(bool a, bool b) { return a || b; }
int64_t on_bitwise_xor(int64_t a, int64_t b) { return a ^ b; }
bool on_bitwise_xor(bool a, bool b) { return a != b; }
// The CPU's shifts of a `bits`-wide integer (held as int64): a count that is
// negative or past the width gives 0 (left) or the sign (right, `largest`
// being the width less the sign bit).
int64_t on_shift_left(int64_t a, int64_t b, int bits) { return b < 0L || b >= int64_t(bits) ? 0L : a << b; }
int64_t on_shift_right(int64_t a, int64_t b, int largest) {
  return b < 0L || b >= int64_t(largest) ? a >> largest : a >> b;
}

// bfloat16 lives in buffers as its bits (no GLSL type): widened exactly,
// narrowed with round-to-nearest-even (NaN stays NaN).
float on_bf16_load(uint16_t bits) { return uintBitsToFloat(uint(bits) << 16); }
uint16_t on_bf16_store(float f) {
  if (isnan(f)) return uint16_t(0x7fc0u);
  const uint u = floatBitsToUint(f);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
)GLSL";

}  // namespace openneuron::compiler
