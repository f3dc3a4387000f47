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
double on_abs(double a) { return abs(a); }

int64_t on_sign(int64_t a) { return int64_t(a > 0) - int64_t(a < 0); }
float on_sign(float a) { return isnan(a) ? a : float(a > 0.0) - float(a < 0.0); }
double on_sign(double a) { return isnan(a) ? a : double(a > 0.0LF) - double(a < 0.0LF); }

int64_t on_maximum(int64_t a, int64_t b) { return a > b ? a : b; }
float on_maximum(float a, float b) { return (isnan(a) || a > b) ? a : b; }
double on_maximum(double a, double b) { return (isnan(a) || a > b) ? a : b; }
bool on_maximum(bool a, bool b) { return a || b; }
int64_t on_minimum(int64_t a, int64_t b) { return a < b ? a : b; }
float on_minimum(float a, float b) { return (isnan(a) || a < b) ? a : b; }
double on_minimum(double a, double b) { return (isnan(a) || a < b) ? a : b; }
bool on_minimum(bool a, bool b) { return a && b; }

int64_t on_floor(int64_t a) { return a; }
float on_floor(float a) { return floor(a); }
double on_floor(double a) { return floor(a); }
int64_t on_ceil(int64_t a) { return a; }
float on_ceil(float a) { return ceil(a); }
double on_ceil(double a) { return ceil(a); }
int64_t on_trunc(int64_t a) { return a; }
float on_trunc(float a) { return trunc(a); }
double on_trunc(double a) { return trunc(a); }
int64_t on_round(int64_t a) { return a; }
float on_round(float a) { return roundEven(a); }
double on_round(double a) { return roundEven(a); }

// exp within 1 ulp (Cephes' polynomial after a Cody-Waite reduction, as the
// C++ target's): GLSL's exp may be 3 + 2|x| ulp off.
float on_exp(float x) {
  if (isnan(x)) return x;
  x = clamp(x, -104.0, 89.0);
  const float n = roundEven(x * 1.44269504088896341);
  float r = fma(n, -0.693359375, x);
  r = fma(n, 2.12194440e-4, r);
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
float on_expm1(float x) {
  if (abs(x) < 1e-5) return x + 0.5 * x * x;
  const float u = on_exp(x);
  if (u == 1.0) return x;
  const float um1 = u - 1.0;
  if (um1 == -1.0 || isinf(u)) return um1;
  return um1 * x / log(u);
}
float on_log(float x) {
  if (isnan(x) || x < 0.0) return ON_NAN;
  if (x == 0.0) return -ON_INF;
  if (isinf(x)) return x;
  return log(x);
}
float on_log2(float x) { return isnan(x) || x < 0.0 ? ON_NAN : x == 0.0 ? -ON_INF : isinf(x) ? x : log2(x); }
float on_log10(float x) { return on_log(x) * 0.43429448190325176; }
float on_log1p(float x) {
  if (isnan(x) || x < -1.0) return ON_NAN;
  if (x == -1.0) return -ON_INF;
  if (isinf(x)) return x;
  const float u = 1.0 + x;
  return u == 1.0 ? x : log(u) * x / (u - 1.0);
}
float on_sqrt(float x) { return x < 0.0 ? ON_NAN : sqrt(x); }
double on_sqrt(double x) { return x < 0.0LF ? double(ON_NAN) : sqrt(x); }
float on_tanh(float x) {
  if (isnan(x)) return x;
  const float a = abs(x);
  if (a > 9.0) return sign(x);
  const float e = on_expm1(-2.0 * a);
  return sign(x) * (-e / (e + 2.0));
}
float on_sigmoid(float x) { return 1.0 / (1.0 + on_exp(-x)); }
float on_asin(float x) { return abs(x) > 1.0 ? ON_NAN : asin(x); }
float on_acos(float x) { return abs(x) > 1.0 ? ON_NAN : acos(x); }
float on_acosh(float x) { return x < 1.0 ? ON_NAN : log(x + sqrt(x * x - 1.0)); }
float on_asinh(float x) {
  const float a = abs(x);
  return sign(x) * (a > 1e18 ? log(a) + 0.6931471805599453 : on_log1p(a + a * a / (1.0 + sqrt(1.0 + a * a))));
}
float on_atanh(float x) { return abs(x) > 1.0 ? ON_NAN : 0.5 * on_log1p(2.0 * x / (1.0 - x)); }
float on_sinh(float x) {
  const float a = abs(x);
  if (a < 1.0) { const float e = on_expm1(a); return sign(x) * 0.5 * (e + e / (e + 1.0)); }
  return sign(x) * 0.5 * (on_exp(a - 0.6931471805599453) * 2.0 - on_exp(-a));
}
float on_cosh(float x) { const float a = abs(x); return 0.5 * on_exp(a) + 0.5 * on_exp(-a); }
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
  else r = exp2(b * log2(m));
  const bool negative = a < 0.0 || (a == 0.0 && floatBitsToUint(a) != 0u);
  return negative && b_odd ? -r : r;
}
// Integer pow as ATen: by squaring, wrapping on overflow; negative
// exponents give 0 except for bases 1 and -1.
int64_t on_pow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) != 0 ? -1 : 1) : 0;
  uint64_t result = 1, base = uint64_t(a);
  for (uint64_t e = uint64_t(b); e != 0; e >>= 1, base *= base)
    if ((e & 1) != 0) result *= base;
  return int64_t(result);
}
float on_fmod(float a, float b) { return b == 0.0 || isinf(a) ? ON_NAN : isinf(b) ? a : a - b * trunc(a / b); }
double on_fmod(double a, double b) { return b == 0.0LF ? double(ON_NAN) : a - b * trunc(a / b); }
int64_t on_fmod(int64_t a, int64_t b) { return a - (a / b) * b; }
float on_remainder(float a, float b) {
  const float r = on_fmod(a, b);
  return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;
}
double on_remainder(double a, double b) {
  const double r = on_fmod(a, b);
  return (r != 0.0LF && ((r < 0.0LF) != (b < 0.0LF))) ? r + b : r;
}
int64_t on_remainder(int64_t a, int64_t b) { return on_mod(a, b); }
float on_div_trunc(float a, float b) { return trunc(a / b); }
double on_div_trunc(double a, double b) { return trunc(a / b); }
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
double on_div_floor(double a, double b) { return b == 0.0LF ? a / b : floor(a / b); }
int64_t on_div_floor(int64_t a, int64_t b) { return on_floordiv(a, b); }
int64_t on_bitwise_not(int64_t a) { return ~a; }
bool on_bitwise_not(bool a) { return !a; }
int64_t on_bitwise_and(int64_t a, int64_t b) { return a & b; }
bool on_bitwise_and(bool a, bool b) { return a && b; }
int64_t on_bitwise_or(int64_t a, int64_t b) { return a | b; }
bool on_bitwise_or(bool a, bool b) { return a || b; }
int64_t on_bitwise_xor(int64_t a, int64_t b) { return a ^ b; }
bool on_bitwise_xor(bool a, bool b) { return a != b; }

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
