#include "compiler/codegen/cpp_library.h"

namespace openneuron::compiler {

// Random kernels of the C++ target's library, for devices whose memory the
// host cannot address: counter-based Philox4x32-10 (Salmon et al. 2011, as
// cuRAND and PyTorch's CUDA generator use), so element i of a call draws
// from counter (i, offset) under key seed, on any thread or device, in any
// order. The generator's (seed, offset) makes results reproducible; they
// differ from the CPU's (Mersenne Twister) numbers, as CUDA's do.
//
// Buffers: out (contiguous); bernoulli_tensor also p (contiguous, out's
// dtype). Scalars: n, seed, offset, then two parameters as the bits of
// doubles (uniform: low, high; normal: mean, std; bernoulli: p) or as
// integers (random: from, range; permutation: none).
const char* const kCppRandomLibrarySource = R"CPP(
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

struct Draw {
  uint32_t r[4];
  Draw(uint64_t seed, uint64_t offset, uint64_t i) {
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    r[0] = static_cast<uint32_t>(i);
    r[1] = static_cast<uint32_t>(i >> 32);
    r[2] = static_cast<uint32_t>(offset);
    r[3] = static_cast<uint32_t>(offset >> 32);
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = 0xD2511F53ull * r[0], p1 = 0xCD9E8D57ull * r[2];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ r[1] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ r[3] ^ k1;
      r[1] = static_cast<uint32_t>(p1);
      r[3] = static_cast<uint32_t>(p0);
      r[0] = n0;
      r[2] = n2;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
  }
  // Uniform in [0, 1) from 24 bits (float) or 53 bits (double).
  float u24(int j) const { return static_cast<float>(r[j] >> 8) * 0x1p-24f; }
  double u53(int j) const {
    return static_cast<double>(((static_cast<uint64_t>(r[j]) << 32) | r[j + 1]) >> 11) * 0x1p-53;
  }
  uint64_t bits64() const { return (static_cast<uint64_t>(r[0]) << 32) | r[1]; }
};

double bits_double(int64_t bits) {
  double v;
  std::memcpy(&v, &bits, 8);
  return v;
}

template <class T>
T uniform01(const Draw& d) {
  if constexpr (sizeof(T) == 4) return d.u24(0);
  else return d.u53(0);
}

template <class T>
void random_uniform(void** b, const int64_t* s, int64_t threads) {
  T* out = static_cast<T*>(b[0]);
  const T low = static_cast<T>(bits_double(s[3])), high = static_cast<T>(bits_double(s[4]));
  const T width = high - low;
#pragma omp parallel for num_threads(threads) if (s[0] > 32768)
  for (int64_t i = 0; i < s[0]; ++i) {
    // As the CPU: a draw that rounds up to `high` is `low` instead.
    const T v = uniform01<T>(Draw(s[1], s[2], i)) * width + low;
    out[i] = v < high ? v : low;
  }
}

// Box-Muller, one value per element: u1 in (0, 1] keeps the log finite.
template <class T>
void random_normal(void** b, const int64_t* s, int64_t threads) {
  T* out = static_cast<T*>(b[0]);
  const T mean = static_cast<T>(bits_double(s[3])), std = static_cast<T>(bits_double(s[4]));
#pragma omp parallel for num_threads(threads) if (s[0] > 32768)
  for (int64_t i = 0; i < s[0]; ++i) {
    const Draw d(s[1], s[2], i);
    T u1, u2;
    if constexpr (sizeof(T) == 4) {
      u1 = 1.0f - d.u24(0);
      u2 = d.u24(1);
    } else {
      u1 = 1.0 - d.u53(0);
      u2 = d.u53(2);
    }
    const T z = std::sqrt(T(-2) * std::log(u1)) * std::cos(T(6.283185307179586476925) * u2);
    out[i] = z * std + mean;
  }
}

// out = (u < p): p a scalar for every element.
template <class T>
void random_bernoulli(void** b, const int64_t* s, int64_t threads) {
  T* out = static_cast<T*>(b[0]);
  const double p = bits_double(s[3]);
#pragma omp parallel for num_threads(threads) if (s[0] > 32768)
  for (int64_t i = 0; i < s[0]; ++i) out[i] = static_cast<T>(Draw(s[1], s[2], i).u53(0) < p);
}

// out = (u < p[i]).
template <class T>
void random_bernoulli_tensor(void** b, const int64_t* s, int64_t threads) {
  const T* p = static_cast<const T*>(b[0]);
  T* out = static_cast<T*>(b[1]);
#pragma omp parallel for num_threads(threads) if (s[0] > 32768)
  for (int64_t i = 0; i < s[0]; ++i) out[i] = static_cast<T>(Draw(s[1], s[2], i).u53(0) < static_cast<double>(p[i]));
}

// Integers in [from, from + range), range > 0.
template <class T>
void random_integers(void** b, const int64_t* s, int64_t threads) {
  T* out = static_cast<T*>(b[0]);
  const int64_t from = s[3];
  const uint64_t range = static_cast<uint64_t>(s[4]);
#pragma omp parallel for num_threads(threads) if (s[0] > 32768)
  for (int64_t i = 0; i < s[0]; ++i)
    out[i] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(from) + Draw(s[1], s[2], i).bits64() % range));
}

// A random permutation of 0..n-1 (randperm): Fisher-Yates, element i
// swapped with one drawn from [0, i] by draw i. One thread: each swap
// depends on the ones before it (n is small where randperm is used).
template <class T>
void random_permutation(void** b, const int64_t* s, int64_t) {
  T* out = static_cast<T*>(b[0]);
  for (int64_t i = 0; i < s[0]; ++i) out[i] = static_cast<T>(i);
  for (int64_t i = s[0] - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(Draw(s[1], s[2], i).bits64() % static_cast<uint64_t>(i + 1));
    const T v = out[i];
    out[i] = out[j];
    out[j] = v;
  }
}

}  // namespace

#define RANDOM_ENTRY(name, call, nb)                                              \
  extern "C" void name(void** b, const int64_t* s, int64_t t) { call(b, s, t); } \
  extern "C" const int64_t name##_info[5] = {nb, 5, 1, 1, 1};
#define RANDOM_FLOATS(name, nb) RANDOM_ENTRY(name##_f32, name<float>, nb) RANDOM_ENTRY(name##_f64, name<double>, nb)
#define RANDOM_INTEGERS(name, nb)                                                                    \
  RANDOM_ENTRY(name##_i64, name<int64_t>, nb) RANDOM_ENTRY(name##_i32, name<int32_t>, nb)            \
  RANDOM_ENTRY(name##_i16, name<int16_t>, nb) RANDOM_ENTRY(name##_i8, name<int8_t>, nb)              \
  RANDOM_ENTRY(name##_u8, name<uint8_t>, nb)

RANDOM_FLOATS(random_uniform, 1)
RANDOM_FLOATS(random_normal, 1)
RANDOM_FLOATS(random_bernoulli_tensor, 2)
RANDOM_FLOATS(random_bernoulli, 1)
RANDOM_INTEGERS(random_bernoulli, 1)
RANDOM_FLOATS(random_integers, 1)
RANDOM_INTEGERS(random_integers, 1)
RANDOM_FLOATS(random_permutation, 1)
RANDOM_INTEGERS(random_permutation, 1)
)CPP";

}  // namespace openneuron::compiler
