#include "compiler/codegen/prelude.h"

namespace openneuron::compiler {

const char* const kKernelPrelude = R"PRELUDE(
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <algorithm>
#include <type_traits>

// glibc's libmvec has SIMD versions of libm's functions (at most 4 ulp from
// the correctly rounded result); declaring them lets loops that call exp,
// tanh, ... vectorise. math.h declares them only under -ffast-math, whose
// other effects (no NaN, no signed zero) we cannot have.
#if defined(__x86_64__) && defined(__GLIBC__) && !defined(__FAST_MATH__)
#define ON_SIMD1(name) __attribute__((__simd__("notinbranch"))) float name##f(float) noexcept; \
                       __attribute__((__simd__("notinbranch"))) double name(double) noexcept;
#define ON_SIMD2(name) __attribute__((__simd__("notinbranch"))) float name##f(float, float) noexcept; \
                       __attribute__((__simd__("notinbranch"))) double name(double, double) noexcept;
extern "C" {
ON_SIMD1(exp) ON_SIMD1(log) ON_SIMD1(sin) ON_SIMD1(cos) ON_SIMD2(pow)
#if __GLIBC_PREREQ(2, 35)
ON_SIMD1(acos) ON_SIMD1(acosh) ON_SIMD1(asin) ON_SIMD1(asinh) ON_SIMD1(atan) ON_SIMD1(atanh)
ON_SIMD1(cbrt) ON_SIMD1(cosh) ON_SIMD1(erf) ON_SIMD1(erfc) ON_SIMD1(exp10) ON_SIMD1(exp2)
ON_SIMD1(expm1) ON_SIMD1(log10) ON_SIMD1(log1p) ON_SIMD1(log2) ON_SIMD1(sinh) ON_SIMD1(tan)
ON_SIMD1(tanh) ON_SIMD2(atan2) ON_SIMD2(hypot)
#endif
}
#undef ON_SIMD1
#undef ON_SIMD2
#endif

// Kernels are built with -ffp-contract=off so that a*b+c rounds twice, as
// eager does; the prelude's own polynomials ask for fused multiply-adds where
// the machine has them (half the instructions, one rounding fewer).
#ifdef __FMA__
#define ON_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define ON_FMA(a, b, c) ((a) * (b) + (c))
#endif
// float exp inline, so loops vectorise without a call per vector (libmvec's
// expf is 3-4x slower here, and takes a scalar fallback for every vector
// holding an underflowing lane, such as softmax's masked -inf scores).
// Cephes' polynomial after a Cody-Waite reduction: within 1 ulp of the true
// value over the whole range (checked against float64 exp on every 7th
// float in [-110, 90]); 2^n applied as two factors so denormal results and
// overflow to infinity come out right.
static inline float on_exp(float x) {
  // x clamped to at most 89 on its bits (positive floats order as their
  // bits, negative ones are negative integers): float selects here let GCC
  // fold constants through them into a loop a third longer. NaN is put back
  // at the end.
  int32_t xb;
  std::memcpy(&xb, &x, 4);
  xb = xb < 0x42B20000 ? xb : 0x42B20000;  // 89.0f
  float xc;
  std::memcpy(&xc, &xb, 4);
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln2)
  float r = ON_FMA(n, -0.693359375f, xc);
  r = ON_FMA(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = ON_FMA(p, r, 1.3981999507e-3f);
  p = ON_FMA(p, r, 8.3334519073e-3f);
  p = ON_FMA(p, r, 4.1665795894e-2f);
  p = ON_FMA(p, r, 1.6666665459e-1f);
  p = ON_FMA(p, r, 5.0000001201e-1f);
  p = ON_FMA(p, r * r, r) + 1.0f;
  int32_t ni = static_cast<int32_t>(n);
  ni = ni < -150 ? -150 : ni;
  // Below -104 the result is 0: the second factor is 0 there, so that no
  // lane forms a denormal product (a microcode assist on x86: softmax over
  // masked -inf scores ran 4x slower).
  const bool underflows = x < -104.0f;
  const int32_t half = ni >> 1;
  const int32_t b1 = (half + 127) << 23, b2 = underflows ? 0 : (ni - half + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  const float e = p * s1 * s2;
  return x != x ? x : underflows ? 0.0f : e;
}
// double exp through libmvec, with arguments kept on its fast path: below
// ln(DBL_MIN) they are shifted up by 512*ln2 and the result scaled back by
// 2^-512; above ln(DBL_MAX) the result is infinity.
static inline double on_exp(double x) {
  const bool low = x < -708.39641853226408, high = x > 709.78271289338397;
  const double e = std::exp(low ? (x < -800.0 ? -800.0 : x) + 354.891356446692039 : high ? 0.0 : x);
  return low ? e * 7.4583407312002067e-155 : high ? std::numeric_limits<double>::infinity() : e;
}

typedef _Float16 on_half;

struct on_bfloat16 {
  uint16_t bits;
  on_bfloat16() = default;
  on_bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (f != f) { bits = 0x7fc0; return; }
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    bits = static_cast<uint16_t>(u >> 16);
  }
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

static inline int64_t on_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t on_mod(int64_t a, int64_t b) { return a - on_floordiv(a, b) * b; }
static inline int64_t on_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t on_min(int64_t a, int64_t b) { return a < b ? a : b; }

template <typename T> static inline T on_abs(T a) { return a < T(0) ? -a : a; }
static inline bool on_abs(bool a) { return a; }
// NaN gives 0, as ATen's sign and Inductor's.
template <typename T> static inline T on_sign(T a) { return static_cast<T>((a > T(0)) - (a < T(0))); }
// The sign bit itself (-0.0 and negative NaN too), read as bits: GCC 12
// crashes on std::signbit in a vectorised loop that converts bfloat16.
static inline bool on_signbit(float a) { uint32_t u; std::memcpy(&u, &a, 4); return u >> 31; }
static inline bool on_signbit(double a) { uint64_t u; std::memcpy(&u, &a, 8); return u >> 63; }
template <typename T> static inline T on_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> static inline T on_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
template <typename T> static inline T on_floor(T a) { return std::floor(a); }
static inline int64_t on_floor(int64_t a) { return a; }
template <typename T> static inline T on_ceil(T a) { return std::ceil(a); }
static inline int64_t on_ceil(int64_t a) { return a; }
template <typename T> static inline T on_trunc(T a) { return std::trunc(a); }
static inline int64_t on_trunc(int64_t a) { return a; }
template <typename T> static inline T on_round(T a) { return std::nearbyint(a); }
static inline int64_t on_round(int64_t a) { return a; }
// Integer pow as ATen computes it: squaring (wrapping on overflow, done in
// unsigned arithmetic so the wrap is defined); a negative exponent gives 0
// except for bases 1 and -1.
template <typename T> static inline T on_pow(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_signed_v<T>)
      if (b < 0) return a == 1 ? T(1) : a == T(-1) ? ((b % 2) ? T(-1) : T(1)) : T(0);
    using U = std::make_unsigned_t<T>;
    U result = 1, base = static_cast<U>(a);
    for (U e = static_cast<U>(b); e; e >>= 1, base *= base)
      if (e & 1) result *= base;
    return static_cast<T>(result);
  } else {
    return std::pow(a, b);
  }
}
template <typename T> static inline T on_fmod(T a, T b) { return std::fmod(a, b); }
static inline int64_t on_fmod(int64_t a, int64_t b) { return a % b; }
template <typename T> static inline T on_remainder(T a, T b) {
  T r = std::fmod(a, b);
  return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
}
static inline int64_t on_remainder(int64_t a, int64_t b) { return on_mod(a, b); }
template <typename T> static inline T on_div_trunc(T a, T b) { return std::trunc(a / b); }
static inline int64_t on_div_trunc(int64_t a, int64_t b) { return a / b; }
template <typename T> static inline T on_div_floor(T a, T b) {
  if (b == T(0)) return a / b;
  T m = std::fmod(a, b);
  T d = (a - m) / b;
  if (m != T(0) && ((b < T(0)) != (m < T(0)))) d -= T(1);
  if (d == T(0)) return std::copysign(T(0), a / b);
  T f = std::floor(d);
  return (d - f > T(0.5)) ? f + T(1) : f;
}
static inline int64_t on_div_floor(int64_t a, int64_t b) { return on_floordiv(a, b); }
static inline int64_t on_bitwise_not(int64_t a) { return ~a; }
static inline bool on_bitwise_not(bool a) { return !a; }
static inline int64_t on_bitwise_and(int64_t a, int64_t b) { return a & b; }
static inline bool on_bitwise_and(bool a, bool b) { return a && b; }
static inline int64_t on_bitwise_or(int64_t a, int64_t b) { return a | b; }
static inline bool on_bitwise_or(bool a, bool b) { return a || b; }
static inline int64_t on_bitwise_xor(int64_t a, int64_t b) { return a ^ b; }
static inline bool on_bitwise_xor(bool a, bool b) { return a != b; }
// The CPU's shifts of a `bits`-wide integer (held as int64): a count that is
// negative or past the width gives 0 (left) or the sign (right, `largest`
// being the width less the sign bit).
static inline int64_t on_shift_left(int64_t a, int64_t b, int bits) {
  return b < 0 || b >= bits ? 0 : static_cast<int64_t>(static_cast<uint64_t>(a) << b);
}
static inline int64_t on_shift_right(int64_t a, int64_t b, int largest) { return b < 0 || b >= largest ? a >> largest : a >> b; }
// digamma as ATen's CPU kernel computes it (Cephes' algorithm): x moved up
// to 10 by psi(x) = psi(x + 1) - 1 / x, then the asymptotic series in
// 1 / x^2 (Bernoulli numbers B_2k / 2k, highest first); negative x by the
// reflection formula, pi / tan(pi r) from x's fraction r in double.
template <typename T> static inline T on_digamma(T x) {
  if (x == T(0)) return std::copysign(std::numeric_limits<T>::infinity(), -x);
  T reflection = 0;
  if (x < T(0)) {
    if (x == std::trunc(x)) return std::numeric_limits<T>::quiet_NaN();
    const double r = static_cast<double>(x) - std::trunc(static_cast<double>(x));
    reflection = static_cast<T>(3.14159265358979323846 / std::tan(3.14159265358979323846 * r));
    x = T(1) - x;
  }
  T result = 0;
  while (x < T(10)) {
    result -= T(1) / x;
    x += T(1);
  }
  if (x == T(10)) return result + T(2.25175258906672110764) - reflection;
  T y = 0;
  if (x < T(1e17)) {
    const T z = T(1) / (x * x);
    T p = T(1.0 / 12.0);
    p = p * z + T(-691.0 / 32760.0);
    p = p * z + T(1.0 / 132.0);
    p = p * z + T(-1.0 / 240.0);
    p = p * z + T(1.0 / 252.0);
    p = p * z + T(-1.0 / 120.0);
    p = p * z + T(1.0 / 12.0);
    y = z * p;
  }
  return result + std::log(x) - T(0.5) / x - y - reflection;
}
// The inverse error function as ATen's CPU kernel computes it: a rational
// first guess (Pavlis' central and tail fits), then two Newton steps on erf.
template <typename T> static inline T on_erfinv(T y) {
  const T a = std::abs(y);
  if (a > T(1)) return std::numeric_limits<T>::quiet_NaN();
  if (a == T(1)) return std::copysign(std::numeric_limits<T>::infinity(), y);
  T x;
  if (a <= T(0.7)) {
    const T z = y * y;
    const T num = ((T(-0.140543331) * z + T(0.914624893)) * z + T(-1.645349621)) * z + T(0.886226899);
    const T den = (((T(0.012229801) * z + T(-0.329097515)) * z + T(1.442710462)) * z + T(-2.118377725)) * z + T(1);
    x = y * num / den;
  } else {
    const T z = std::sqrt(-std::log((T(1) - a) / T(2)));
    const T num = ((T(1.641345311) * z + T(3.429567803)) * z + T(-1.624906493)) * z + T(-1.970840454);
    const T den = (T(1.637067800) * z + T(3.543889200)) * z + T(1);
    x = std::copysign(num, y) / den;
  }
  const T two_over_sqrt_pi = T(1.12837916709551257390);
  x = x - (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  x = x - (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  return x;
}
)PRELUDE";

}  // namespace openneuron::compiler
