#include "compiler/codegen/glsl_library.h"

#include <string>
#include <utility>
#include <vector>

#include "compiler/codegen/glsl_kernel.h"

namespace openneuron::compiler {
namespace {

// The GLSL library's indexing, scan and loss kernels: the entry points and
// arguments of the C++ library's (cpp_library_indexing.cc), written for a
// grid of invocations instead of a thread pool. Each invocation takes
// elements (or whole lines where a result carries along a dim) of a
// grid-stride loop; the runtime sizes the grid to the largest buffer.
// Results equal the C++ kernels': sums and scatters run in index order
// within a line, as the CPU, never by atomics in whatever order.

constexpr int kWorkgroup = 64;

struct Type {
  std::string suffix, glsl, compute;  // compute: the type arithmetic runs in
  int bytes;
  bool floating;
};

const std::vector<Type>& float_types() {
  static const std::vector<Type> t = {{"f32", "float", "float", 4, true}, {"f64", "double", "double", 8, true}};
  return t;
}

const std::vector<Type>& number_types() {
  static const std::vector<Type> t = {
      {"f32", "float", "float", 4, true},         {"f64", "double", "double", 8, true},
      {"i64", "int64_t", "int64_t", 8, false},    {"i32", "int32_t", "int64_t", 4, false},
      {"i16", "int16_t", "int64_t", 2, false},    {"i8", "int8_t", "int64_t", 1, false},
      {"u8", "uint8_t", "int64_t", 1, false}};
  return t;
}

// `text` with $T (element type), $C (compute type), $R (its reference
// type), $S (element bytes) and $V(...) (a double's bits as a $T) filled in.
std::string fill(std::string text, const Type& t) {
  const std::string value = t.glsl == "float"    ? "on_double_bits"
                            : t.glsl == "double" ? "int64BitsToDouble"
                                                 : t.glsl + "(on_double_bits_int";
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"$T", t.glsl}, {"$C", t.compute}, {"$R", "OnRef_" + t.glsl}, {"$S", std::to_string(t.bytes)}};
  for (const auto& [key, with] : keys)
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + with.size()))
      text.replace(at, key.size(), with);
  // int32 reads widened by hand (glsl_kernel.cc: lavapipe zero-extends them).
  for (size_t at = text.find("int64_t(OnRef_int32_t("); at != std::string::npos;
       at = text.find("int64_t(OnRef_int32_t(", at))
    text.replace(at, 7, "on_sext32");
  // $V(x): the closing parenthesis needs one more for the integer form.
  for (size_t at = text.find("$V("); at != std::string::npos; at = text.find("$V(", at)) {
    const size_t close = text.find(')', at);
    const std::string arg = text.substr(at + 3, close - at - 3);
    const std::string with = value + "(" + arg + (t.floating ? ")" : "))");
    text.replace(at, close + 1 - at, with);
    at += with.size();
  }
  return text;
}

std::string entry(const std::string& name, int bindings, int scalars, const std::vector<std::string>& refs,
                  const std::string& body) {
  return glsl_entry_preamble(name, bindings, scalars, kWorkgroup, refs) + body;
}

const char* const kGrid = R"GLSL(
#define on_first int64_t(gl_GlobalInvocationID.x)
#define on_step (int64_t(gl_NumWorkGroups.x) * 64L)
)GLSL";

// Coordinates in the C++ library's Coords layout: s[0] rank, s[1] dim,
// s[2..10) the index tensor's sizes, s[10 + 8 t + d] tensor t's strides.
const char* const kCoords = R"GLSL(
int64_t on_numel() {
  int64_t n = 1L;
  for (int d = 0; d < int(on_args.s[0]); ++d) n *= on_args.s[2 + d];
  return n;
}
// Offset in tensor t of element p of the index tensor's shape; skip_dim
// leaves the indexed dim out.
int64_t on_offset(int64_t p, int t, bool skip_dim) {
  int64_t off = 0L;
  for (int d = int(on_args.s[0]) - 1; d >= 0; --d) {
    const int64_t size = on_args.s[2 + d], c = p % size;
    p /= size;
    if (!(skip_dim && d == int(on_args.s[1]))) off += c * on_args.s[10 + 8 * t + d];
  }
  return off;
}
)GLSL";

// The word an element of `bytes` moves in (16: two 8-byte words).
std::string copy_type(int bytes) {
  return bytes == 1 ? "uint8_t" : bytes == 2 ? "uint16_t" : bytes == 4 ? "uint" : "uint64_t";
}

std::string copy_function(int bytes) {
  if (bytes == 16)
    return "void on_copy(uint64_t dst, uint64_t src) {\n  OnRef_uint64_t(dst).v = OnRef_uint64_t(src).v;\n"
           "  OnRef_uint64_t(dst + 8ul).v = OnRef_uint64_t(src + 8ul).v;\n}\n";
  const std::string t = copy_type(bytes);
  return "void on_copy(uint64_t dst, uint64_t src) { OnRef_" + t + "(dst).v = OnRef_" + t + "(src).v; }\n";
}

// out[o, j, i] = src[o, idx[j], i]. buffers src, idx, out, err; scalars
// outer, size, inner, count, int32 indices.
std::string index_select(int bytes) {
  return entry("index_select_e" + std::to_string(bytes), 4, 5, {copy_type(bytes)},
               copy_function(bytes) + kGrid + R"GLSL(
void main() {
  const uint64_t src = on_args.b[0], idx = on_args.b[1], res = on_args.b[2], err = on_args.b[3];
  const int64_t outer = on_args.s[0], size = on_args.s[1], inner = on_args.s[2], count = on_args.s[3];
  const bool i32 = on_args.s[4] != 0L;
  const uint64_t B = )GLSL" + std::to_string(bytes) + R"GLSL(ul;
  for (int64_t t = on_first; t < outer * count * inner; t += on_step) {
    const int64_t r = t / inner, i = t - r * inner, o = r / count, j = r - o * count;
    const int64_t k = i32 ? int64_t(OnIdx32(idx + uint64_t(j) * 4ul).v) : OnIdx64(idx + uint64_t(j) * 8ul).v;
    if (uint64_t(k) >= uint64_t(size)) {
      on_bad(err, k);
      continue;
    }
    on_copy(res + uint64_t(t) * B, src + uint64_t((o * size + k) * inner + i) * B);
  }
}
)GLSL");
}

// gather: out[p] = src[p with dim replaced by idx[p]]. buffers src, idx,
// out, err; scalars Coords (src, idx, out), then src's dim size.
std::string gather(int bytes) {
  return entry("gather_e" + std::to_string(bytes), 4, 35, {copy_type(bytes)},
               copy_function(bytes) + kGrid + kCoords + R"GLSL(
void main() {
  const uint64_t src = on_args.b[0], idx = on_args.b[1], res = on_args.b[2], err = on_args.b[3];
  const int64_t size = on_args.s[34], along = on_args.s[10 + int(on_args.s[1])];
  const uint64_t B = )GLSL" + std::to_string(bytes) + R"GLSL(ul;
  const int64_t n = on_numel();
  for (int64_t p = on_first; p < n; p += on_step) {
    const int64_t k = OnIdx64(idx + uint64_t(on_offset(p, 1, false)) * 8ul).v;
    if (uint64_t(k) >= uint64_t(size)) {
      on_bad(err, k);
      continue;
    }
    on_copy(res + uint64_t(on_offset(p, 2, false)) * B, src + uint64_t(on_offset(p, 0, true) + k * along) * B);
  }
}
)GLSL");
}

// scatter into out (in place): out[p with dim replaced by idx[p]] = (or
// +=, *=) src[p], or a value. buffers out, idx, src, err; scalars Coords
// (out, idx, src), out's dim size, mode (0 assign, 1 add, 2 the value,
// 3 multiply, 4 max, 5 min: a NaN on either side wins), the value's bits. One invocation per line along dim: only
// elements of one line can meet in one output, so lines run in parallel
// and each in index order, as the CPU.
std::string scatter(const Type& t) {
  const std::string nan = t.floating ? "isnan" : "on_never_nan";
  return entry("scatter_" + t.suffix, 4, 37, {t.glsl}, fill(std::string(kGrid) + kCoords + R"GLSL(
bool on_never_nan(int64_t v) { return false; }
void main() {
  const uint64_t res = on_args.b[0], idx = on_args.b[1], src = on_args.b[2], err = on_args.b[3];
  const int rank = int(on_args.s[0]), dim = int(on_args.s[1]);
  const int64_t len = on_args.s[2 + dim], size = on_args.s[34], mode = on_args.s[35];
  const $T value = $V(on_args.s[36]);
  const int64_t lines = on_numel() / len;
  const int64_t out_along = on_args.s[10 + dim], idx_along = on_args.s[18 + dim], src_along = on_args.s[26 + dim];
  for (int64_t line = on_first; line < lines; line += on_step) {
    int64_t q = line, o_out = 0L, o_idx = 0L, o_src = 0L;
    for (int d = rank - 1; d >= 0; --d) {
      if (d == dim) continue;
      const int64_t extent = on_args.s[2 + d], c = q % extent;
      q /= extent;
      o_out += c * on_args.s[10 + d];
      o_idx += c * on_args.s[18 + d];
      o_src += c * on_args.s[26 + d];
    }
    for (int64_t j = 0L; j < len; ++j) {
      const int64_t k = OnIdx64(idx + uint64_t(o_idx + j * idx_along) * 8ul).v;
      if (uint64_t(k) >= uint64_t(size)) {
        on_bad(err, k);
        break;
      }
      const uint64_t dst = res + uint64_t(o_out + k * out_along) * $Sul;
      const $C v = mode == 2L ? $C(value) : $C($R(src + uint64_t(o_src + j * src_along) * $Sul).v);
      const $C old = $C($R(dst).v);
      if (mode >= 4L) {
        if (!)GLSL" + nan + "(old) && (" + nan + R"GLSL((v) || (mode == 4L ? v > old : v < old))) $R(dst).v = $T(v);
        continue;
      }
      $R(dst).v = $T(mode == 1L ? old + v : mode == 3L ? old * v : v);
    }
  }
}
)GLSL", t));
}

// embedding_dense_backward: out[w, d] += grad[i, d] for each i with
// idx[i] == w (out zeroed by the caller; padding_idx skipped). buffers
// grad, idx, out, err; scalars n, dim, weights, padding_idx,
// scale_grad_by_freq (not taken here: the caller scales). One invocation
// per column, summing in index order.
std::string embedding_backward(const Type& t) {
  return entry("embedding_backward_" + t.suffix, 4, 5, {t.glsl}, fill(std::string(kGrid) + R"GLSL(
void main() {
  const uint64_t grad = on_args.b[0], idx = on_args.b[1], res = on_args.b[2], err = on_args.b[3];
  const int64_t n = on_args.s[0], dim = on_args.s[1], weights = on_args.s[2], padding = on_args.s[3];
  for (int64_t d = on_first; d < dim; d += on_step) {
    for (int64_t i = 0L; i < n; ++i) {
      const int64_t w = OnIdx64(idx + uint64_t(i) * 8ul).v;
      if (uint64_t(w) >= uint64_t(weights)) {
        on_bad(err, w);
        continue;
      }
      if (w == padding) continue;
      const uint64_t at = res + uint64_t(w * dim + d) * $Sul;
      $R(at).v += $R(grad + uint64_t(i * dim + d) * $Sul).v;
    }
  }
}
)GLSL", t));
}

// Compensated (Kahan) addition: float sums of many terms stay within a
// rounding of the CPU's double accumulation.
const char* const kKahan = R"GLSL(
void on_kahan(inout $C sum, inout $C carry, $C v) {
  precise $C y = v - carry;
  precise $C t = sum + y;
  precise $C c = (t - sum) - y;
  carry = c;
  sum = t;
}
)GLSL";

// nll_loss forward. buffers self [n, c], target [n], weight [c] (or any
// buffer), out ([] or [n]), total_weight [], err; scalars n, c,
// has_weight, reduction (0 none, 1 mean, 2 sum), ignore_index. A reduced
// loss is one workgroup's: 64 lanes, then a tree.
std::string nll_loss_forward(const Type& t) {
  return entry("nll_loss_forward_" + t.suffix, 6, 5, {t.glsl}, fill(std::string(kGrid) + kKahan + R"GLSL(
shared $C on_loss[64];
shared $C on_weight[64];
void main() {
  const uint64_t x = on_args.b[0], target = on_args.b[1], weight = on_args.b[2];
  const uint64_t res = on_args.b[3], total = on_args.b[4], err = on_args.b[5];
  const int64_t n = on_args.s[0], c = on_args.s[1], reduction = on_args.s[3], ignore = on_args.s[4];
  const bool weighted = on_args.s[2] != 0L;
  if (reduction == 0L) {
    for (int64_t i = on_first; i < n; i += on_step) {
      const int64_t k = OnIdx64(target + uint64_t(i) * 8ul).v;
      $C loss = $C(0);
      if (k != ignore) {
        if (uint64_t(k) >= uint64_t(c)) {
          on_bad(err, k);
          continue;
        }
        const $C w = weighted ? $R(weight + uint64_t(k) * $Sul).v : $C(1);
        loss = -w * $R(x + uint64_t(i * c + k) * $Sul).v;
      }
      $R(res + uint64_t(i) * $Sul).v = loss;
    }
    if (on_first == 0L) $R(total).v = $T(0);
    return;
  }
  if (gl_WorkGroupID.x != 0u) return;
  const uint lane = gl_LocalInvocationID.x;
  $C loss = $C(0), loss_carry = $C(0), weights = $C(0), weights_carry = $C(0);
  for (int64_t i = int64_t(lane); i < n; i += 64L) {
    const int64_t k = OnIdx64(target + uint64_t(i) * 8ul).v;
    if (k == ignore) continue;
    if (uint64_t(k) >= uint64_t(c)) {
      on_bad(err, k);
      continue;
    }
    const $C w = weighted ? $R(weight + uint64_t(k) * $Sul).v : $C(1);
    on_kahan(loss, loss_carry, -($R(x + uint64_t(i * c + k) * $Sul).v * w));
    on_kahan(weights, weights_carry, w);
  }
  on_loss[lane] = loss - loss_carry;
  on_weight[lane] = weights - weights_carry;
  barrier();
  for (uint width = 32u; width > 0u; width >>= 1u) {
    if (lane < width) {
      on_loss[lane] += on_loss[lane + width];
      on_weight[lane] += on_weight[lane + width];
    }
    barrier();
  }
  if (lane == 0u) {
    $R(total).v = on_weight[0];
    $R(res).v = reduction == 1L ? on_div(on_loss[0], on_weight[0]) : on_loss[0];
  }
}
)GLSL", t));
}

// nll_loss backward. buffers grad_out ([] or [n]), target, weight,
// total_weight, grad_input [n, c], err; scalars as the forward. One
// invocation per element of grad_input.
std::string nll_loss_backward(const Type& t) {
  return entry("nll_loss_backward_" + t.suffix, 6, 5, {t.glsl}, fill(std::string(kGrid) + R"GLSL(
void main() {
  const uint64_t go = on_args.b[0], target = on_args.b[1], weight = on_args.b[2];
  const uint64_t total = on_args.b[3], gi = on_args.b[4], err = on_args.b[5];
  const int64_t n = on_args.s[0], c = on_args.s[1], reduction = on_args.s[3], ignore = on_args.s[4];
  const bool weighted = on_args.s[2] != 0L;
  for (int64_t e = on_first; e < n * c; e += on_step) {
    const int64_t i = e / c, j = e - i * c;
    const int64_t k = OnIdx64(target + uint64_t(i) * 8ul).v;
    $C g = $C(0);
    if (k != ignore && uint64_t(k) >= uint64_t(c)) {
      if (j == 0L) on_bad(err, k);
    } else if (k != ignore && j == k) {
      const $C w = weighted ? $R(weight + uint64_t(k) * $Sul).v : $C(1);
      const $C up = reduction == 0L ? $R(go + uint64_t(i) * $Sul).v
                  : reduction == 1L ? on_div($R(go).v, $R(total).v) : $R(go).v;
      g = -w * up;
    }
    $R(gi + uint64_t(e) * $Sul).v = g;
  }
}
)GLSL", t));
}

// cumsum (mode 0) / cumprod (mode 1) along the middle dim of [outer, size,
// inner], one invocation per line; integers accumulate in int64 (as the
// CPU), float32 sums compensated.
std::string scan(const Type& t) {
  return entry("scan_" + t.suffix, 2, 4, {t.glsl}, fill(std::string(kGrid) + kKahan + R"GLSL(
void main() {
  const uint64_t x = on_args.b[0], res = on_args.b[1];
  const int64_t outer = on_args.s[0], size = on_args.s[1], inner = on_args.s[2], mode = on_args.s[3];
  for (int64_t r = on_first; r < outer * inner; r += on_step) {
    const int64_t o = r / inner, i = r - o * inner;
    $C acc = mode == 0L ? $C(0) : $C(1), carry = $C(0);
    for (int64_t k = 0L; k < size; ++k) {
      const uint64_t at = uint64_t((o * size + k) * inner + i) * $Sul;
      const $C v = $C($R(x + at).v);
      if (mode == 1L) acc *= v;
      else if ()GLSL" + std::string(t.floating ? "true" : "false") + R"GLSL() on_kahan(acc, carry, v);
      else acc += v;
      $R(res + at).v = $T(acc - carry);
    }
  }
}
)GLSL", t));
}

// argmax (mode 0) / argmin (mode 1) along the middle dim of [outer, size,
// inner]: the first extreme, a NaN counting as the extreme (as the CPU);
// values too when with_values (max.dim / min.dim). buffers x, values,
// indices; scalars outer, size, inner, mode, with_values. One workgroup
// per line: 64 lanes, then a tree that keeps the lower index on ties.
std::string arg_extreme(const Type& t) {
  const std::string nan_rules = t.floating ? R"GLSL(
  if (isnan(v) && isnan(y)) return yi < vi;
  if (isnan(v)) return false;
  if (isnan(y)) return true;)GLSL"
                                           : "";
  return entry("arg_extreme_" + t.suffix, 3, 5, {t.glsl, "int64_t"}, fill(R"GLSL(
shared $C on_value[64];
shared int64_t on_index[64];
// Whether candidate (y, yi) beats (v, vi).
bool on_better($C y, int64_t yi, $C v, int64_t vi, bool largest) {)GLSL" + nan_rules + R"GLSL(
  if (y == v) return yi < vi;
  return largest ? y > v : y < v;
}
void main() {
  const uint64_t x = on_args.b[0], values = on_args.b[1], indices = on_args.b[2];
  const int64_t outer = on_args.s[0], size = on_args.s[1], inner = on_args.s[2];
  const bool largest = on_args.s[3] == 0L, with_values = on_args.s[4] != 0L;
  const uint lane = gl_LocalInvocationID.x;
  for (int64_t line = int64_t(gl_WorkGroupID.x); line < outer * inner; line += int64_t(gl_NumWorkGroups.x)) {
    const int64_t o = line / inner, base = o * size * inner + (line - o * inner);
    $C v = $C($R(x + uint64_t(base) * $Sul).v);
    int64_t vi = 0L;
    for (int64_t k = lane == 0u ? 64L : int64_t(lane); k < size; k += 64L) {
      const $C y = $C($R(x + uint64_t(base + k * inner) * $Sul).v);
      if (on_better(y, k, v, vi, largest)) {
        v = y;
        vi = k;
      }
    }
    on_value[lane] = v;
    on_index[lane] = vi;
    barrier();
    for (uint width = 32u; width > 0u; width >>= 1u) {
      if (lane < width && on_better(on_value[lane + width], on_index[lane + width], on_value[lane], on_index[lane], largest)) {
        on_value[lane] = on_value[lane + width];
        on_index[lane] = on_index[lane + width];
      }
      barrier();
    }
    if (lane == 0u) {
      OnRef_int64_t(indices + uint64_t(line) * 8ul).v = on_index[0];
      if (with_values) $R(values + uint64_t(line) * $Sul).v = $T(on_value[0]);
    }
    barrier();  // the next line reuses the shared arrays
  }
}
)GLSL", t));
}

// sort (s[4] = -1, -2 for stable) and topk (s[4] = k) along the middle dim
// of [outer, size, inner] into values and int64 indices laid out as
// [outer, k, inner], as the C++ library's sort_lines. NaN counts as the
// largest value, as in the CPU's comparators. One workgroup per line;
// each element's place is its rank in the line: how many elements come
// before it, ties in index order (a stable sort: the CPU's order for
// stable sorts and for lines without ties). Quadratic in the line's
// length: the caller sends only lines it bounds (indexing_ops.cc).
std::string sort_lines(const Type& t) {
  const std::string nan_rules = t.floating ? R"GLSL(
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? ai < bi : isnan(a) == descending;)GLSL"
                                           : "";
  return entry("sort_lines_" + t.suffix, 3, 5, {t.glsl, "int64_t"}, fill(R"GLSL(
// Whether (a, ai) comes before (b, bi).
bool on_before($C a, int64_t ai, $C b, int64_t bi, bool descending) {)GLSL" + nan_rules + R"GLSL(
  if (a == b) return ai < bi;
  return descending ? a > b : a < b;
}
void main() {
  const uint64_t x = on_args.b[0], values = on_args.b[1], indices = on_args.b[2];
  const int64_t outer = on_args.s[0], size = on_args.s[1], inner = on_args.s[2];
  const bool descending = on_args.s[3] != 0L;
  const int64_t k = on_args.s[4] >= 0L ? on_args.s[4] : size;
  for (int64_t line = int64_t(gl_WorkGroupID.x); line < outer * inner; line += int64_t(gl_NumWorkGroups.x)) {
    const int64_t o = line / inner, i = line - o * inner, base = o * size * inner + i;
    for (int64_t j = int64_t(gl_LocalInvocationID.x); j < size; j += 64L) {
      const $C v = $C($R(x + uint64_t(base + j * inner) * $Sul).v);
      int64_t rank = 0L, e = 0L;
      for (; e + 4L <= size; e += 4L) {  // four per loop trip (lavapipe counts them)
        rank += on_before($C($R(x + uint64_t(base + e * inner) * $Sul).v), e, v, j, descending) ? 1L : 0L;
        rank += on_before($C($R(x + uint64_t(base + (e + 1L) * inner) * $Sul).v), e + 1L, v, j, descending) ? 1L : 0L;
        rank += on_before($C($R(x + uint64_t(base + (e + 2L) * inner) * $Sul).v), e + 2L, v, j, descending) ? 1L : 0L;
        rank += on_before($C($R(x + uint64_t(base + (e + 3L) * inner) * $Sul).v), e + 3L, v, j, descending) ? 1L : 0L;
      }
      for (; e < size; ++e)
        rank += on_before($C($R(x + uint64_t(base + e * inner) * $Sul).v), e, v, j, descending) ? 1L : 0L;
      if (rank < k) {
        const uint64_t at = uint64_t((o * k + rank) * inner + i);
        $R(values + at * $Sul).v = $T(v);
        OnRef_int64_t(indices + at * 8ul).v = j;
      }
    }
  }
}
)GLSL", t));
}

// One pass of a merge sort of contiguous lines [lines, size] (longer lines
// than sort_lines takes): sorted runs of `width` elements, pairwise, into
// runs of 2 width. Each element's place is its index in its run plus the
// count of the other run's elements that come before it, found by binary
// search; elements carry their index in the line (none on the first pass:
// their position), which breaks ties, so the order is stable and every
// place distinct. Buffers: values and indices in, values and indices out;
// scalars lines, size, width, descending, first.
std::string merge_lines(const Type& t) {
  const std::string nan_rules = t.floating ? R"GLSL(
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? ai < bi : isnan(a) == descending;)GLSL"
                                           : "";
  return entry("merge_lines_" + t.suffix, 4, 5, {t.glsl, "int64_t"}, fill(std::string(kGrid) + R"GLSL(
bool on_before($C a, int64_t ai, $C b, int64_t bi, bool descending) {)GLSL" + nan_rules + R"GLSL(
  if (a == b) return ai < bi;
  return descending ? a > b : a < b;
}
void main() {
  const uint64_t xv = on_args.b[0], xi = on_args.b[1], yv = on_args.b[2], yi = on_args.b[3];
  const int64_t lines = on_args.s[0], size = on_args.s[1], width = on_args.s[2];
  const bool descending = on_args.s[3] != 0L, first = on_args.s[4] != 0L;
  for (int64_t e = on_first; e < lines * size; e += on_step) {
    const int64_t line = e / size, p = e - line * size, base = line * size;
    const int64_t r0 = (p / (2L * width)) * (2L * width), mid = min(r0 + width, size), end = min(r0 + 2L * width, size);
    const $C v = $C($R(xv + uint64_t(e) * $Sul).v);
    const int64_t vi = first ? p : OnRef_int64_t(xi + uint64_t(e) * 8ul).v;
    const bool in_a = p < mid;
    // The other run: [lo, hi); count its elements before (v, vi).
    int64_t lo = in_a ? mid : r0, hi = in_a ? end : mid;
    const int64_t other = lo;
    while (lo < hi) {
      const int64_t m = (lo + hi) / 2L;
      const $C w = $C($R(xv + uint64_t(base + m) * $Sul).v);
      const int64_t wi = first ? m : OnRef_int64_t(xi + uint64_t(base + m) * 8ul).v;
      if (on_before(w, wi, v, vi, descending)) lo = m + 1L; else hi = m;
    }
    const int64_t at = base + r0 + (p - (in_a ? r0 : mid)) + (lo - other);
    $R(yv + uint64_t(at) * $Sul).v = $T(v);
    OnRef_int64_t(yi + uint64_t(at) * 8ul).v = vi;
  }
}
)GLSL", t));
}

// arange (mode 0: start + i * step) and linspace (mode 1: from both
// ends, as the CPU). buffer out; scalars n, start, step (bits of
// doubles), mode, end. Integer entries take arange only (integral start
// and step: the caller sends integer linspace elsewhere).
std::string ramp(const Type& t) {
  const std::string body = t.floating ? R"GLSL(
  const $T start = $V(on_args.s[1]), step = $V(on_args.s[2]), end = $V(on_args.s[4]);
  const int64_t middle = n / 2L;
  for (int64_t i = on_first; i < n; i += on_step)
    $R(res + uint64_t(i) * $Sul).v = mode == 0L || i < middle ? start + step * $T(i) : end - step * $T(n - i - 1L);
)GLSL"
                                      : R"GLSL(
  const int64_t start = on_double_bits_int(on_args.s[1]), step = on_double_bits_int(on_args.s[2]);
  for (int64_t i = on_first; i < n; i += on_step) $R(res + uint64_t(i) * $Sul).v = $T(start + step * i);
)GLSL";
  return entry("ramp_" + t.suffix, 1, 5, {t.glsl}, fill(std::string(kGrid) + R"GLSL(
void main() {
  const uint64_t res = on_args.b[0];
  const int64_t n = on_args.s[0], mode = on_args.s[3];)GLSL" + body + "}\n", t));
}

}  // namespace

// Before the first entry, so every shader has them (glsl_target.cc).
const char* const kGlslIndexingShared = R"GLSL(
layout(buffer_reference, std430, buffer_reference_align = 8) buffer OnIdx64 { int64_t v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer OnIdx32 { int v; };
// An index out of range: err[0] = 1, err[1] = the index (one of them,
// when several invocations find one).
void on_bad(uint64_t err, int64_t index) {
  OnIdx64(err + 8ul).v = index;
  OnIdx64(err).v = 1L;
}
)GLSL";

std::string glsl_indexing_library_entries() {
  std::string res;
  for (int bytes : {1, 2, 4, 8, 16}) res += index_select(bytes) + gather(bytes);
  for (const Type& t : number_types()) res += scatter(t) + scan(t) + arg_extreme(t) + sort_lines(t) + merge_lines(t) + ramp(t);
  for (const Type& t : float_types()) res += embedding_backward(t) + nll_loss_forward(t) + nll_loss_backward(t);
  return res;
}

}  // namespace openneuron::compiler
