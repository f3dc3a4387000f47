#include "compiler/codegen/cpp_library.h"

namespace openneuron::compiler {

// Indexing, scan and loss kernels of the C++ target's library: ops whose
// element reads depend on other tensors' values (index_select, gather,
// scatter, embedding's backward, nll_loss) or that carry a value along a
// dim (cumsum, argmax), which the compiler's IR does not express.
//
// Every kernel takes (buffers, scalars, threads). Tensors are contiguous
// unless a kernel takes their strides; index tensors are int64 (int32 where
// a scalar says so). An index out of range sets err[0] = 1 and err[1] to
// the index (err is an int64[2] the caller zeroes and reads after the
// kernel), so the op raises at its call, as on the CPU.
const char* const kCppIndexingLibrarySource = R"CPP(
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

struct Bad {
  int64_t* err;
  void operator()(int64_t index) const {
    if (!err[0]) {
      err[0] = 1;
      err[1] = index;
    }
  }
};

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

template <class T>
T bits_as(int64_t v) {
  double d;
  std::memcpy(&d, &v, sizeof d);
  return static_cast<T>(d);
}

template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// out[o, j, i] = src[o, idx[j], i]. scalars: outer, size (of the indexed
// dim), inner, count (indices), int32 indices.
template <int B>
void index_select(void** b, const int64_t* s, int64_t threads) {
  const char* src = static_cast<const char*>(b[0]);
  char* out = static_cast<char*>(b[2]);
  const Bad bad{static_cast<int64_t*>(b[3])};
  const int64_t outer = s[0], size = s[1], inner = s[2], count = s[3];
  const bool i32 = s[4] != 0;
  auto index = [&](int64_t j) {
    return i32 ? static_cast<const int32_t*>(b[1])[j] : static_cast<const int64_t*>(b[1])[j];
  };
  for (int64_t j = 0; j < count; ++j)
    if (index(j) < 0 || index(j) >= size) return bad(index(j));
#pragma omp parallel for num_threads(threads) if (outer * count * inner > 65536)
  for (int64_t r = 0; r < outer * count; ++r) {
    const int64_t o = r / count, j = r % count;
    std::memcpy(out + r * inner * B, src + (o * size + index(j)) * inner * B, inner * B);
  }
}

// Strided coordinates of rank <= 8: scalars hold rank, dim, the index
// tensor's sizes, then strides of the tensors (elements), 8 slots each.
struct Coords {
  int64_t rank, dim, sizes[8];
  const int64_t* strides;  // per tensor: 8 slots
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d = 0; d < rank; ++d) n *= sizes[d];
    return n;
  }
  // Offsets of element `p` of the index tensor's shape in tensors t0..tn;
  // `skip_dim` leaves out the indexed dim for tensor `which`.
  void offsets(int64_t p, int n, int64_t* out, int which) const {
    for (int t = 0; t < n; ++t) out[t] = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t c = p % sizes[d];
      p /= sizes[d];
      for (int t = 0; t < n; ++t)
        if (!(t == which && d == dim)) out[t] += c * strides[t * 8 + d];
    }
  }
};

Coords coords(const int64_t* s) {
  Coords c;
  c.rank = s[0];
  c.dim = s[1];
  for (int d = 0; d < 8; ++d) c.sizes[d] = s[2 + d];
  c.strides = s + 10;
  return c;
}

// gather: out[p] = src[p with dim replaced by idx[p]]. buffers: src, idx,
// out, err; scalars: coords (tensors src, idx, out), then src's dim size.
template <int B>
void gather(void** b, const int64_t* s, int64_t) {
  const Coords c = coords(s);
  const int64_t size = s[34];
  const int64_t* idx = static_cast<const int64_t*>(b[1]);
  const Bad bad{static_cast<int64_t*>(b[3])};
  const int64_t n = c.numel();
  int64_t off[3];
  for (int64_t p = 0; p < n; ++p) {
    c.offsets(p, 3, off, 0);
    const int64_t k = idx[off[1]];
    if (k < 0 || k >= size) return bad(k);
    std::memcpy(static_cast<char*>(b[2]) + off[2] * B,
                static_cast<const char*>(b[0]) + (off[0] + k * c.strides[c.dim]) * B, B);
  }
}

// scatter into out (in place): out[p with dim replaced by idx[p]] =
// (or +=) src[p], or a value. buffers: out, idx, src, err; scalars: coords
// (tensors out, idx, src), out's dim size, mode (0 assign, 1 add, 2 assign
// the value, 3 multiply, 4 max, 5 min: a NaN on either side wins, as the
// CPU's scatter_reduce), the value's bits. In index order, as the CPU.
template <class T>
void scatter(void** b, const int64_t* s, int64_t) {
  const Coords c = coords(s);
  const int64_t size = s[34], mode = s[35];
  const T value = bits_as<T>(s[36]);
  T* out = static_cast<T*>(b[0]);
  const int64_t* idx = static_cast<const int64_t*>(b[1]);
  const T* src = static_cast<const T*>(b[2]);
  const Bad bad{static_cast<int64_t*>(b[3])};
  const int64_t n = c.numel();
  int64_t off[3];
  for (int64_t p = 0; p < n; ++p) {
    c.offsets(p, 3, off, 0);
    const int64_t k = idx[off[1]];
    if (k < 0 || k >= size) return bad(k);
    T& dst = out[off[0] + k * c.strides[c.dim]];
    if (mode == 0) dst = src[off[2]];
    else if (mode == 1) dst = static_cast<T>(dst + src[off[2]]);
    else if (mode == 2) dst = value;
    else if (mode == 3) dst = static_cast<T>(dst * src[off[2]]);
    else {
      const T v = src[off[2]];
      if (is_nan(dst)) continue;
      if (is_nan(v) || (mode == 4 ? v > dst : v < dst)) dst = v;
    }
  }
}

// embedding_dense_backward: out[w, d] = sum over i with idx[i] == w of
// grad[i, d] (scaled by 1/count(w) when asked), padding_idx skipped; out
// zeroed by the caller.
// buffers: grad, idx, out, err; scalars: n, dim, weights, padding_idx,
// scale_grad_by_freq. Each thread owns columns, so sums run in index order.
template <class T>
void embedding_backward(void** b, const int64_t* s, int64_t threads) {
  const T* grad = static_cast<const T*>(b[0]);
  const int64_t* idx = static_cast<const int64_t*>(b[1]);
  T* out = static_cast<T*>(b[2]);
  const Bad bad{static_cast<int64_t*>(b[3])};
  const int64_t n = s[0], dim = s[1], weights = s[2], padding = s[3];
  const bool scale = s[4] != 0;
  std::vector<int64_t> counts(scale ? weights : 0);
  for (int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= weights) return bad(idx[i]);
    if (scale) ++counts[idx[i]];
  }
#pragma omp parallel for num_threads(threads) if (n * dim > 65536)
  for (int64_t d = 0; d < dim; ++d)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t w = idx[i];
      if (w == padding) continue;
      const T g = grad[i * dim + d];
      out[w * dim + d] += scale ? static_cast<T>(g / static_cast<T>(counts[w])) : g;
    }
}

// nll_loss forward. buffers: self [n, c], target [n], weight [c] (or any
// buffer), out ([] or [n]), total_weight [], err; scalars: n, c,
// has_weight, reduction (0 none, 1 mean, 2 sum), ignore_index.
template <class T>
void nll_loss_forward(void** b, const int64_t* s, int64_t) {
  const T* x = static_cast<const T*>(b[0]);
  const int64_t* target = static_cast<const int64_t*>(b[1]);
  const T* weight = static_cast<const T*>(b[2]);
  T* out = static_cast<T*>(b[3]);
  T* total = static_cast<T*>(b[4]);
  const Bad bad{static_cast<int64_t*>(b[5])};
  const int64_t n = s[0], c = s[1], reduction = s[3], ignore = s[4];
  const bool weighted = s[2] != 0;
  for (int64_t i = 0; i < n; ++i)
    if (target[i] != ignore && (target[i] < 0 || target[i] >= c)) return bad(target[i]);
  if (reduction == 0) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = target[i];
      out[i] = t == ignore ? T(0) : static_cast<T>(-(weighted ? weight[t] : T(1)) * x[i * c + t]);
    }
    *total = T(0);
    return;
  }
  Acc<T> sum = 0, weights = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = target[i];
    if (t == ignore) continue;
    const T w = weighted ? weight[t] : T(1);
    sum -= static_cast<Acc<T>>(x[i * c + t]) * w;
    weights += w;
  }
  *total = static_cast<T>(weights);
  *out = static_cast<T>(reduction == 1 ? sum / weights : sum);
}

// nll_loss backward. buffers: grad_out ([] or [n]), target, weight,
// total_weight, grad_input [n, c], err; scalars as the forward.
template <class T>
void nll_loss_backward(void** b, const int64_t* s, int64_t) {
  const T* go = static_cast<const T*>(b[0]);
  const int64_t* target = static_cast<const int64_t*>(b[1]);
  const T* weight = static_cast<const T*>(b[2]);
  const T total = *static_cast<const T*>(b[3]);
  T* gi = static_cast<T*>(b[4]);
  const Bad bad{static_cast<int64_t*>(b[5])};
  const int64_t n = s[0], c = s[1], reduction = s[3], ignore = s[4];
  const bool weighted = s[2] != 0;
  std::memset(gi, 0, sizeof(T) * n * c);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = target[i];
    if (t == ignore) continue;
    if (t < 0 || t >= c) return bad(t);
    const T w = weighted ? weight[t] : T(1);
    const T g = reduction == 0 ? go[i] : reduction == 1 ? static_cast<T>(go[0] / total) : go[0];
    gi[i * c + t] = static_cast<T>(-w * g);
  }
}

// cumsum (mode 0) / cumprod (mode 1) along the middle dim of [outer, size,
// inner], accumulating as the CPU does (double for floats, int64 for ints).
template <class T>
void scan(void** b, const int64_t* s, int64_t threads) {
  const T* x = static_cast<const T*>(b[0]);
  T* out = static_cast<T*>(b[1]);
  const int64_t outer = s[0], size = s[1], inner = s[2], mode = s[3];
#pragma omp parallel for num_threads(threads) if (outer * inner > 4096)
  for (int64_t r = 0; r < outer * inner; ++r) {
    const int64_t o = r / inner, i = r % inner;
    Acc<T> acc = mode == 0 ? 0 : 1;
    for (int64_t k = 0; k < size; ++k) {
      const int64_t at = (o * size + k) * inner + i;
      acc = mode == 0 ? acc + static_cast<Acc<T>>(x[at]) : acc * static_cast<Acc<T>>(x[at]);
      out[at] = static_cast<T>(acc);
    }
  }
}

// argmax (mode 0) / argmin (mode 1) along the middle dim of [outer, size,
// inner]: the first extreme, a NaN counting as the extreme (as the CPU);
// values written too when b[1] is given (max.dim / min.dim).
template <class T>
void arg_extreme(void** b, const int64_t* s, int64_t threads) {
  const T* x = static_cast<const T*>(b[0]);
  T* values = static_cast<T*>(b[1]);
  int64_t* indices = static_cast<int64_t*>(b[2]);
  const int64_t outer = s[0], size = s[1], inner = s[2], mode = s[3];
  const bool with_values = s[4] != 0;
#pragma omp parallel for num_threads(threads) if (outer * inner * size > 65536)
  for (int64_t r = 0; r < outer * inner; ++r) {
    const int64_t o = r / inner, i = r % inner;
    int64_t best = 0;
    T v = x[o * size * inner + i];
    for (int64_t k = 1; k < size; ++k) {
      const T y = x[(o * size + k) * inner + i];
      bool take;
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(v)) break;
        take = std::isnan(y) || (mode == 0 ? y > v : y < v);
      } else {
        take = mode == 0 ? y > v : y < v;
      }
      if (take) {
        v = y;
        best = k;
      }
    }
    indices[r] = best;
    if (with_values) values[r] = v;
  }
}

// sort (s[4] = -1, or -2 for stable: every element) and topk (s[4] = k:
// the first k, sorted) along the middle dim of [outer, size, inner], into
// values and int64 indices laid out as [outer, k, inner]. NaN counts as the
// largest value, as in the CPU's comparators. Each runs the CPU kernel's
// own steps over (value, index) pairs with the same comparators (sort:
// std::sort, or std::stable_sort; topk: partial_sort when k * 64 <= size,
// else nth_element and a sort of the first k - 1), so tied values come out
// in the CPU's order.
template <class T>
void sort_lines(void** b, const int64_t* s, int64_t threads) {
  const T* x = static_cast<const T*>(b[0]);
  T* values = static_cast<T*>(b[1]);
  int64_t* indices = static_cast<int64_t*>(b[2]);
  const int64_t outer = s[0], size = s[1], inner = s[2];
  const bool descending = s[3] != 0, topk = s[4] >= 0, stable = s[4] == -2;
  const int64_t k = topk ? s[4] : size;
  using Pair = std::pair<T, int64_t>;
  auto nan = [](T v) {
    if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
    else return false;
  };
  auto larger = [&](const Pair& a, const Pair& c) { return (nan(a.first) && !nan(c.first)) || a.first > c.first; };
  auto smaller = [&](const Pair& a, const Pair& c) { return (!nan(a.first) && nan(c.first)) || a.first < c.first; };
#pragma omp parallel for num_threads(threads) if (outer * inner * size > 16384)
  for (int64_t r = 0; r < outer * inner; ++r) {
    const int64_t o = r / inner, i = r % inner;
    std::vector<Pair> line(size);
    for (int64_t j = 0; j < size; ++j) line[j] = {x[(o * size + j) * inner + i], j};
    auto order = [&](auto before) {
      if (!topk) {
        if (stable) std::stable_sort(line.begin(), line.end(), before);
        else std::sort(line.begin(), line.end(), before);
      } else if (k * 64 <= size) {
        std::partial_sort(line.begin(), line.begin() + k, line.end(), before);
      } else {
        std::nth_element(line.begin(), line.begin() + k - 1, line.end(), before);
        std::sort(line.begin(), line.begin() + k - 1, before);
      }
    };
    if (descending) order(larger);
    else order(smaller);
    for (int64_t j = 0; j < k; ++j) {
      values[(o * k + j) * inner + i] = line[j].first;
      indices[(o * k + j) * inner + i] = line[j].second;
    }
  }
}

// arange (mode 0: start + i * step) and linspace (mode 1, as the CPU:
// from both ends). scalars: n, start, step (bits of doubles), mode, end.
template <class T>
void ramp(void** b, const int64_t* s, int64_t) {
  T* out = static_cast<T*>(b[0]);
  const int64_t n = s[0], mode = s[3];
  double start, step, end;
  std::memcpy(&start, s + 1, 8);
  std::memcpy(&step, s + 2, 8);
  std::memcpy(&end, s + 4, 8);
  if (mode == 0 && std::is_integral_v<T>) {  // as the CPU: truncated start and step, int64 arithmetic
    const auto first = static_cast<int64_t>(start), by = static_cast<int64_t>(step);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(first + i * by);
    return;
  }
  if (mode == 0) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<double>(i) * step);
    return;
  }
  const int64_t half = n / 2;
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(i < half ? start + step * static_cast<double>(i)
                                     : end - step * static_cast<double>(n - i - 1));
}

}  // namespace

// Each entry point, and its metadata: bindings, scalars, workgroup size.
#define ENTRY(name, call, nb, ns)                                                 \
  extern "C" void name(void** b, const int64_t* s, int64_t t) { call(b, s, t); } \
  extern "C" const int64_t name##_info[5] = {nb, ns, 1, 1, 1};
#define ON_BYTES(name, nb, ns)                                                             \
  ENTRY(name##_e1, name<1>, nb, ns) ENTRY(name##_e2, name<2>, nb, ns)                        \
  ENTRY(name##_e4, name<4>, nb, ns) ENTRY(name##_e8, name<8>, nb, ns) ENTRY(name##_e16, name<16>, nb, ns)
#define ON_FLOATS(name, nb, ns) ENTRY(name##_f32, name<float>, nb, ns) ENTRY(name##_f64, name<double>, nb, ns)
#define ON_NUMBERS(name, nb, ns)                                                                       \
  ON_FLOATS(name, nb, ns) ENTRY(name##_i64, name<int64_t>, nb, ns) ENTRY(name##_i32, name<int32_t>, nb, ns) \
  ENTRY(name##_i16, name<int16_t>, nb, ns) ENTRY(name##_i8, name<int8_t>, nb, ns)                     \
  ENTRY(name##_u8, name<uint8_t>, nb, ns)

ON_BYTES(index_select, 4, 5)
ON_BYTES(gather, 4, 35)
ON_NUMBERS(scatter, 4, 37)
ON_FLOATS(embedding_backward, 4, 5)
ON_FLOATS(nll_loss_forward, 6, 5)
ON_FLOATS(nll_loss_backward, 6, 5)
ON_NUMBERS(scan, 2, 4)
ON_NUMBERS(arg_extreme, 3, 5)
ON_NUMBERS(ramp, 1, 5)
ON_NUMBERS(sort_lines, 3, 5)
)CPP";

}  // namespace openneuron::compiler
