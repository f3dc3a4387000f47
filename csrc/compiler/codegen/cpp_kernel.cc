#include "compiler/codegen/cpp_kernel.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "compiler/ir/errors.h"
#include "compiler/ir/view_coords.h"
#include "compiler/codegen/cpp_pointwise.h"
#include "compiler/codegen/reduction_stores.h"
#include "compiler/codegen/cpp_types.h"

namespace openneuron::compiler {

namespace {

// Below this many elements a kernel runs on one thread.
constexpr int64_t kParallelThreshold = 32768;
// Most columns per tile of a column reduction: one accumulator array per
// reduction, kept in L1 while the rows stream by. Wide tiles make each row's
// read a long contiguous run; tiles narrow (down to 64) to feed every thread.
constexpr int64_t kColumnTile = 1024;
// Inner loops shorter than this absorb the dims around them (in loop order):
// a 4x4 or 8x8 image plane is one loop of 16 or 64, not loops of 4 or 8 that
// vectorise poorly and pay their bookkeeping every few elements.
constexpr int64_t kMergeBelow = 512;
// Elements of a row summed into one float partial before it is added to the
// row's double sum (see accumulator_ctype).
constexpr int64_t kPartialSumChunk = 512;

// A float partial sum of a row chunk, added into `sum` after each chunk.
struct PartialSum {
  std::string type, partial, sum;
};

std::string literal(double v, bool is_int, DType ct) {
  std::string t = compute_ctype(ct);
  if (ct == DType::Bool) return v != 0 ? "true" : "false";
  if (std::isnan(v)) return "std::numeric_limits<" + t + ">::quiet_NaN()";
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + t + ">::infinity()";
  char buf[48];
  if (is_int && std::fabs(v) < 9.2e18) std::snprintf(buf, sizeof buf, "%lldLL", static_cast<long long>(v));
  else std::snprintf(buf, sizeof buf, "%.17g", v);
  return "static_cast<" + t + ">(" + buf + ")";
}

// A float value rounded to a 16-bit float `d` and back, as storing it does.
std::string rounded_16bit(const std::string& v, DType d) {
  return "static_cast<float>(static_cast<" + std::string(storage_ctype(d)) + ">(" + v + "))";
}

bool costly(const Node* n) {
  static const std::set<std::string> ops = {
      "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "erf", "erfc", "sin",
      "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "pow", "atan2"};
  return n->kind == NodeKind::Pointwise && ops.count(n->op) > 0;
}

class KernelWriter {
 public:
  // `row_cache`: values (node@coordinates) a row-reduction kernel keeps in a
  // per-row array when first computed and reads back in later passes over the
  // row (softmax's exp), instead of recomputing them.
  // `merge_dims`: at most this many innermost dims share one loop (merged_tail).
  KernelWriter(const KernelGroup& g, const std::string& name, const std::vector<std::string>& symbols,
               size_t merge_dims, std::set<std::string> row_cache = {})
      : g_(g), name_(name), symbols_(symbols), merge_dims_(merge_dims), cache_keys_(std::move(row_cache)) {}

  // After run(): whether an index still divides a merged loop variable (its
  // dims' strides do not span them: a transposed or padded read), so the
  // merged kernel would pay a division per element.
  bool merged_loop_divides() const {
    for (const std::string& var : merged_vars_)
      for (const char* op : {"on_floordiv(", "on_mod("})
        for (size_t at = body_.find(op); at != std::string::npos; at = body_.find(op, at + 1)) {
          size_t depth = 0, end = at + std::string(op).size() - 1;
          do {
            if (body_[end] == '(') ++depth;
            else if (body_[end] == ')') --depth;
          } while (depth > 0 && ++end < body_.size());
          if (mentions(body_.substr(at, end - at), var)) return true;
        }
    return false;
  }

  // After run(): costly values that more than one pass over a row computed.
  std::set<std::string> recomputed_costly_values() const {
    std::set<std::string> out;
    if (row_flat_.empty()) return out;
    for (auto& [key, passes] : key_passes_)
      if (passes.size() > 1 && costly_keys_.count(key)) out.insert(key);
    return out;
  }

  GeneratedKernel run() {
    if (g_.kind == KernelGroup::Kind::Pointwise) write_pointwise();
    else write_reduction();
    return assemble(prologue_ + body_);
  }

  // After run(): for rows of symbolic length whose values this writer keeps
  // in row cache arrays (sized kRowCacheMax), the C++ condition under which
  // they fit; empty when nothing is cached or the length is constant.
  std::string row_cache_condition() const {
    if (row_cache_.empty() || row_len_key_.empty()) return "";
    return "(" + row_len_key_ + ") <= " + std::to_string(kRowCacheMax);
  }

  // Names nodes as `other` did (before run()), so loops written by both can
  // share one function.
  void name_nodes_as(const KernelWriter& other) { local_ids_ = other.local_ids_; }

  // After run(): the loops, as one block.
  std::string loops() const { return "  {\n" + prologue_ + body_ + "  }\n"; }

  // The kernel function around `body` (this writer's symbols and buffers).
  GeneratedKernel assemble(const std::string& body) {
    GeneratedKernel k;
    k.name = name_;
    std::string head = "extern \"C\" void " + name_ +
                       "(void** on_buffers, const int64_t* on_symbols, int64_t on_threads) {\n";
    for (size_t i = 0; i < symbols_.size(); ++i) {
      const std::string& s = symbols_[i];
      const std::string slot = "on_symbols[" + std::to_string(i) + "]";
      // Float symbols (SymFloat, "fs_" names) arrive as the bits of a double.
      if (s.rfind("fs_", 0) == 0)
        head += "  double " + s + "; std::memcpy(&" + s + ", &" + slot + ", 8);\n";
      else
        head += "  const int64_t " + s + " = " + slot + "; (void)" + s + ";\n";
    }
    // Buffers: reads first, then outputs.
    std::vector<Node*> order = reads_;
    for (Node* o : outputs_) order.push_back(o);
    for (size_t i = 0; i < order.size(); ++i) {
      Node* n = order[i];
      bool out = i >= reads_.size();
      std::string t = storage_ctype(n->dtype);
      head += "  " + std::string(out ? "" : "const ") + t + "* __restrict__ " + buffer_name(n) + " = (" +
              (out ? "" : "const ") + t + "*)on_buffers[" + std::to_string(i) + "];\n";
    }
    k.source = head + body + "}\n" +
               entry_info_source(name_, static_cast<int>(order.size()),
                                 static_cast<int>(symbols_.size()));
    k.buffers = order;
    k.num_outputs = static_cast<int>(outputs_.size());
    return k;
  }

 private:
  // ---- emission helpers -----------------------------------------------------
  void line(const std::string& s) { body_ += std::string(indent_ * 2, ' ') + s + "\n"; }
  std::string fresh() { return "v" + std::to_string(counter_++); }

  // Names in the source number a node within this kernel, never by its id in
  // the graph: identical kernels (a model's layers) get identical source.
  std::string local(const Node* n) {
    return std::to_string(local_ids_.emplace(n, local_ids_.size()).first->second);
  }
  std::string buffer_name(const Node* n) { return "b" + local(n); }

  void note_read(Node* n) {
    if (std::find(reads_.begin(), reads_.end(), n) == reads_.end() &&
        std::find(outputs_.begin(), outputs_.end(), n) == outputs_.end())
      reads_.push_back(n);
  }

  static std::vector<Expr> layout_strides(const Node* n) { return n->buffer_strides(); }
  // Kernels receive each tensor's data pointer, which already includes its
  // storage offset: loads are relative to it.
  static Expr layout_offset(const Node*) { return Expr(0); }

  bool is_materialized(const Node* n) const {
    return n->kind == NodeKind::Input || n->kind == NodeKind::ExternOutput || n->materialize;
  }

  std::string value_type(const Node* n) { return compute_ctype(compute_dtype(n->dtype)); }

  std::string load(Node* n, const std::vector<Expr>& strides, const Expr& offset, const std::vector<Expr>& c) {
    note_read(n);
    Expr idx = offset;
    for (size_t i = 0; i < c.size(); ++i) idx = idx + c[i] * strides[i];
    // An input this kernel also stores into may only be read at the element
    // being written: all reads of an element come before its store.
    auto stored = stored_inputs_.find(n);
    if (stored != stored_inputs_.end() && stored->second.second != idx)
      throw ExternNeeded(stored->second.first->fx_name, "store before a read of another element");
    return "static_cast<" + value_type(n) + ">(" + buffer_name(n) + "[" + index_text(idx) + "])";
  }

  // ---- hoisting of loop-invariant index terms ---------------------------------
  // Index terms that depend only on the row's coordinates (and size symbols)
  // are computed once per row, before the inner loops: a floordiv/mod in
  // the inner loop, even an invariant one, stops GCC vectorising it.
  void begin_hoisting(const std::vector<Expr>& row_coords) {
    hoistable_.clear();
    hoistable_.insert(symbols_.begin(), symbols_.end());
    for (const Expr& e : row_coords) e.collect_symbols(hoistable_);
    hoist_pos_ = body_.size();
    hoist_indent_ = indent_;
  }

  void insert_at_row_start(const std::string& text) {
    std::string l = std::string(hoist_indent_ * 2, ' ') + text + "\n";
    body_.insert(hoist_pos_, l);
    hoist_pos_ += l.size();
  }

  std::string index_text(const Expr& idx) {
    if (hoist_pos_ == std::string::npos) return idx.key();
    std::vector<Expr> terms = idx.kind() == Expr::Kind::Add ? idx.operands() : std::vector<Expr>{idx};
    Expr fixed(0), varying(0);
    bool any_fixed = false;
    for (const Expr& t : terms) {
      std::set<std::string> syms;
      t.collect_symbols(syms);
      bool invariant = !syms.empty() &&
                       std::all_of(syms.begin(), syms.end(), [&](const std::string& x) { return hoistable_.count(x) > 0; });
      if (invariant) { fixed = fixed + t; any_fixed = true; }
      else varying = varying + t;
    }
    if (!any_fixed || fixed.kind() == Expr::Kind::Sym) return idx.key();
    std::string& var = hoisted_[fixed.key()];
    if (var.empty()) {
      var = "h" + std::to_string(hoisted_.size());
      insert_at_row_start("const int64_t " + var + " = " + fixed.key() + ";");
    }
    return varying.equals(0) ? var : var + " + (" + varying.key() + ")";
  }

  // The value of `n` at logical coordinates `c`, as a C++ expression (a
  // variable, memoised per scope so shared subexpressions are computed once).
  std::string emit(Node* n, const std::vector<Expr>& c) {
    if (n->host && n->is_compute()) return host_value(n);
    std::string key = std::to_string(n->id) + "@" + join_keys(c);
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end()) return f->second;
    }
    if (auto cached = row_cache_.find(key); cached != row_cache_.end() && row_pass_ >= 0) {
      std::string var = fresh();
      line("const " + value_type(n) + " " + var + " = " + cached->second + "[" + row_flat_ + "];");
      scopes_.back()[key] = var;
      return var;
    }
    std::string expr = compute(n, c);
    // An eager op's 16-bit float result, rounded as its stored value is
    // (Node::rounds_to_dtype).
    if (n->rounds_to_dtype && (n->dtype == DType::Float16 || n->dtype == DType::BFloat16))
      expr = rounded_16bit(expr, n->dtype);
    std::string var = fresh();
    line("const " + value_type(n) + " " + var + " = " + expr + ";");
    scopes_.back()[key] = var;
    if (row_pass_ >= 0) {
      key_passes_[key].insert(row_pass_);
      if (costly(n)) costly_keys_.insert(key);
      if (cache_keys_.count(key) && !row_cache_.count(key) && !row_flat_.empty()) {
        std::string array = "rc" + local(n);
        insert_at_row_start(value_type(n) + " " + array + "[" + std::to_string(row_len_) + "];");
        line(array + "[" + row_flat_ + "] = " + var + ";");
        row_cache_[key] = array;
      }
    }
    return var;
  }

  // A value of CPU scalars only (Node::host): computed once, before the
  // loops, into a variable every iteration reads.
  std::string host_value(Node* n) {
    if (auto it = host_values_.find(n->id); it != host_values_.end()) return it->second;
    std::string loops = std::move(body_);
    body_.clear();
    const int indent = indent_;
    const size_t hoist_pos = hoist_pos_;
    indent_ = 1;
    hoist_pos_ = std::string::npos;
    // Nothing computed in the loops exists yet where this goes.
    auto scopes = std::move(scopes_);
    scopes_.assign(1, {});
    std::string expr = compute(n, {});
    std::string var = fresh();
    line("const " + value_type(n) + " " + var + " = " + expr + ";");
    scopes_ = std::move(scopes);
    prologue_ += body_;
    body_ = std::move(loops);
    indent_ = indent;
    hoist_pos_ = hoist_pos;
    host_values_[n->id] = var;
    return var;
  }

  std::string compute(Node* n, const std::vector<Expr>& c) {
    if (n->kind == NodeKind::Reduce && accumulators_.count(n->id)) {
      if (join_keys(c) != row_key_) throw FusionConflict(current_root_);
      return accumulators_[n->id];
    }
    if (is_materialized(n) && !(current_roots_.count(n->id))) {
      return load(n, layout_strides(n), layout_offset(n), c);
    }
    switch (n->kind) {
      case NodeKind::Constant:
        if (!n->view_args.empty())
          return "static_cast<" + value_type(n) + ">(" + n->view_args[0].key() + ")";
        return literal(n->scalar, n->scalar_is_int, compute_dtype(n->dtype));
      case NodeKind::View: return emit_view(n, c);
      case NodeKind::Pointwise:
        // arange's index: the node's own (1-d) coordinate.
        if (n->op == "iota") return "static_cast<int64_t>(" + c[0].key() + ")";
        return emit_pointwise(n, c);
      default: break;
    }
    throw CompileError(std::string("kernel cannot compute a ") + kind_name(n->kind) + " node here");
  }

  std::string emit_pointwise(Node* n, const std::vector<Expr>& c) {
    std::string ct = compute_ctype(n->compute);
    std::vector<std::string> args;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      std::string v = emit(n->inputs[i], c);
      std::string t = (n->op == "where" && i == 0) ? "bool" : ct;
      args.push_back("static_cast<" + t + ">(" + v + ")");
    }
    while (args.size() < 3) args.push_back("");
    std::string r = pointwise_cpp(n->op, ct, args[0], args[1], args[2]);
    std::string vt = value_type(n);
    if (n->op == "identity" && (n->dtype == DType::Float16 || n->dtype == DType::BFloat16))
      return rounded_16bit(r, n->dtype);
    // A narrower integer's value wraps to its type, as the stored value and
    // the CPU's arithmetic in that type do (uint8 200 + 200 is 144, also
    // when fused into a cast to float).
    if (is_integral(n->dtype) && n->dtype != DType::Int64)
      return "static_cast<int64_t>(static_cast<" + std::string(storage_ctype(n->dtype)) + ">(static_cast<int64_t>(" +
             r + ")))";
    return "static_cast<" + vt + ">(" + r + ")";
  }

  std::string emit_view(Node* v, const std::vector<Expr>& c) {
    Node* in = v->inputs[0];
    if (v->op == "as_strided") {
      std::vector<Expr> strides(v->view_args.begin(), v->view_args.end() - 1);
      return load(in, strides, v->view_args.back() - in->offset, c);
    }
    if (v->op == "pad") return emit_pad(v, c);
    return emit(in, view_input_coords(v, c));
  }

  // constant_pad_nd: the input at coordinates clamped into its bounds (a
  // load that is always valid, so loops still vectorise), or the fill value
  // where the coordinates fall in the padding.
  std::string emit_pad(Node* v, const std::vector<Expr>& c) {
    Node* in = v->inputs[0];
    std::vector<Expr> ic(c.size(), Expr(0));
    std::string inside;
    for (size_t d = 0; d < c.size(); ++d) {
      Expr at = c[d] - v->view_args[d];
      if (v->view_args[d].equals(0) && v->shape[d] == in->shape[d]) {
        ic[d] = at;
        continue;
      }
      ic[d] = Expr::max(Expr::min(at, in->shape[d] - 1), Expr(0));
      inside += std::string(inside.empty() ? "" : " && ") + "(" + at.key() + ") >= 0 && (" + at.key() + ") < (" +
                in->shape[d].key() + ")";
    }
    std::string value = emit(in, ic);
    if (inside.empty()) return value;
    return "((" + inside + ") ? " + value + " : static_cast<" + value_type(v) + ">(" +
           literal(v->scalar, v->scalar_is_int, compute_dtype(v->dtype)) + "))";
  }

  static Expr flat_index(const std::vector<Expr>& c, const std::vector<Expr>& strides) {
    Expr idx(0);
    for (size_t i = 0; i < c.size(); ++i) idx = idx + c[i] * strides[i];
    return idx;
  }

  void store(Node* root, const std::vector<Expr>& c, const std::string& value) {
    if (std::find(outputs_.begin(), outputs_.end(), root) == outputs_.end()) outputs_.push_back(root);
    Expr idx = flat_index(c, root->buffer_strides());
    std::string st = storage_ctype(root->dtype);
    line(buffer_name(root) + "[" + index_text(idx) + "] = static_cast<" + st + ">(" + value + ");");
  }

  // An OpenMP parallel loop, threaded only when `work` elements justify it;
  // `simd` when it is also the innermost loop, vectorised as the inner loops
  // of other nests are (without it GCC needs a runtime overlap check per
  // pair of buffers, and gives up when there are many).
  void parallel_pragma(const Expr& work, bool simd = false) {
    line(std::string("#pragma omp parallel for") + (simd ? " simd" : "") + " num_threads(on_threads) if(parallel: (" +
         work.key() + ") > " + std::to_string(kParallelThreshold) + ") schedule(static)");
  }

  // Inside a loop over the flattened `dims`, with flat index `flat`: one
  // coordinate variable per dim (prefix + dim), written into `coord`.
  void decompose(const std::string& flat, const std::string& prefix, const std::vector<int64_t>& dims,
                 std::vector<Expr>& coord) {
    line("int64_t " + prefix + "rest = " + flat + "; (void)" + prefix + "rest;");
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
      // A dim of size 1 has coordinate 0, written as such so it matches the
      // coordinates a broadcast (expand) of a row scalar produces.
      if (g_.shape[*it].equals(1)) {
        coord[*it] = Expr(0);
        continue;
      }
      std::string var = prefix + std::to_string(*it);
      const std::string size = g_.shape[*it].key();
      line("const int64_t " + var + " = " + prefix + "rest % " + size + "; " + prefix + "rest /= " + size + ";");
      coord[*it] = Expr::symbol(var);
    }
  }

  // The trailing dims of `dims` (outermost first) that share the innermost
  // loop: up to merge_dims_ of them, while the loop is shorter than
  // kMergeBelow and every size is known.
  std::vector<int64_t> merged_tail(const std::vector<int64_t>& dims) const {
    std::vector<int64_t> group = {dims.back()};
    // An empty dim (size 0) has no elements to merge and would be a divisor.
    if (!g_.shape[dims.back()].is_const() || g_.shape[dims.back()].value() < 1) return group;
    int64_t extent = g_.shape[dims.back()].value();
    while (group.size() < std::min(dims.size(), merge_dims_)) {
      int64_t d = dims[dims.size() - 1 - group.size()];
      if (!g_.shape[d].is_const() || g_.shape[d].value() < 1 || extent >= kMergeBelow) break;
      extent *= g_.shape[d].value();
      group.insert(group.begin(), d);
    }
    return group;
  }

  // The loop variable over `group`'s dims, and each dim's coordinate in it
  // (quotients and remainders, which indices whose strides span the dims
  // fold back into the variable: see Expr's operator+).
  std::string open_merged(const std::string& prefix, const std::vector<int64_t>& group, std::vector<Expr>& coord) {
    std::string var = prefix;
    for (size_t j = 0; j < group.size(); ++j) {
      if (j) var += '_';
      var += std::to_string(group[j]);
    }
    if (group.size() > 1) merged_vars_.push_back(var);
    Expr x = Expr::symbol(var);
    for (size_t j = group.size() - 1; j > 0; --j) {
      coord[group[j]] = Expr::mod(x, g_.shape[group[j]]);
      x = Expr::floordiv(x, g_.shape[group[j]]);
    }
    coord[group[0]] = x;
    return var;
  }

  Expr extent(const std::vector<int64_t>& dims) const {
    Expr n(1);
    for (int64_t d : dims) n = n * g_.shape[d];
    return n;
  }

  static bool mentions(const std::string& text, const std::string& var) {
    auto is_name = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    for (size_t at = text.find(var); at != std::string::npos; at = text.find(var, at + 1))
      if ((at == 0 || !is_name(text[at - 1])) && (at + var.size() >= text.size() || !is_name(text[at + var.size()])))
        return true;
    return false;
  }

  // The loop nest of a pointwise kernel: all dims but the innermost
  // (merged_tail) flattened into one parallel outer loop, the innermost one
  // the vectorised loop. Returns the coordinate of every dim.
  std::vector<Expr> open_loops() {
    const std::vector<Expr>& shape = g_.shape;
    std::vector<Expr> coord(shape.size(), Expr(0));
    if (shape.empty()) return coord;
    std::vector<int64_t> order = loop_order();
    std::vector<int64_t> inner = merged_tail(order);
    std::vector<int64_t> outer(order.begin(), order.end() - static_cast<std::ptrdiff_t>(inner.size()));
    if (!outer.empty()) {
      Expr count = extent(outer);
      parallel_pragma(count * extent(inner));
      line("for (int64_t io = 0; io < " + count.key() + "; ++io) {");
      ++indent_;
      ++open_;
      decompose("io", "i", outer, coord);
      begin_hoisting(coord);
      line("#pragma omp simd");
    } else {
      parallel_pragma(extent(inner), /*simd=*/true);
    }
    std::string var = open_merged("i", inner, coord);
    line("for (int64_t " + var + " = 0; " + var + " < " + extent(inner).key() + "; ++" + var + ") {");
    ++indent_;
    ++open_;
    return coord;
  }

  // Dims from outermost to innermost loop: by the first full-size output's
  // strides, largest first, so stores are contiguous in the inner loop (a
  // permuted, column-major output would otherwise be written with a stride).
  // Logical order when the strides are symbolic.
  std::vector<int64_t> loop_order() const {
    std::vector<int64_t> order(g_.shape.size());
    for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int64_t>(d);
    for (Node* r : g_.roots) {
      if (r->shape != g_.shape) continue;
      std::vector<Expr> strides = r->buffer_strides();
      for (const Expr& st : strides)
        if (!st.is_const()) return order;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        auto key = [&](int64_t d) { return g_.shape[d].equals(1) ? INT64_MAX : strides[d].value(); };
        return key(a) > key(b);
      });
      return order;
    }
    return order;
  }

  void close_loops() {
    while (open_ > 0) {
      --indent_;
      line("}");
      --open_;
    }
  }

  // ---- pointwise ----------------------------------------------------------
  void write_pointwise() {
    for (Node* r : g_.roots) current_roots_.insert(r->id);
    indent_ = 1;
    scopes_.emplace_back();
    std::vector<Expr> c = open_loops();
    for (Node* r : g_.roots)
      if (r->is_store()) stored_inputs_[r->store_into] = {r, flat_index(c, r->buffer_strides())};
    scopes_.emplace_back();
    // Every value first, then every store: a store into an input comes after
    // all reads of that element.
    std::vector<std::string> values;
    for (Node* r : g_.roots) values.push_back(emit(r, c));
    for (size_t i = 0; i < g_.roots.size(); ++i) store(g_.roots[i], c, values[i]);
    scopes_.pop_back();
    close_loops();
    scopes_.pop_back();
  }

  // ---- reductions ---------------------------------------------------------
  void write_reduction() {
    std::vector<int64_t> kept, reduced = g_.dims;
    for (size_t i = 0; i < g_.shape.size(); ++i)
      if (!std::count(reduced.begin(), reduced.end(), static_cast<int64_t>(i))) kept.push_back(i);
    if (column_schedule_applies(kept)) return write_column_reduction(kept, reduced);
    indent_ = 1;
    scopes_.emplace_back();
    // One outer (parallel) loop over rows.
    std::vector<Expr> row(g_.shape.size(), Expr(0));
    Expr rows(1);
    for (int64_t d : kept) rows = rows * g_.shape[d];
    Expr row_len(1);
    for (int64_t d : reduced) row_len = row_len * g_.shape[d];
    parallel_pragma(rows * row_len);
    line("for (int64_t ro = 0; ro < " + rows.key() + "; ++ro) {");
    ++indent_;
    decompose("ro", "k", kept, row);
    begin_hoisting(row);
    plan_row_cache(reduced);
    scopes_.emplace_back();
    for (Node* r : g_.roots) current_roots_.insert(r->id);
    row_key_ = join_keys(row);
    const std::vector<Node*> folded = stores_for_the_first_pass(g_);
    std::vector<Node*> last;  // stores over what a later pass reads
    auto write_root = [&](Node* r) {
      current_root_ = r->id;
      if (r->shape == g_.shape) {
        row_pass_ = ++passes_;
        write_epilogue(r, row, reduced);
        row_pass_ = -1;
      } else {
        store(r, row_coords(r, row), emit(r, row_coords(r, row)));
      }
    };
    bool first_pass = true;
    size_t i = 0;
    while (i < g_.roots.size()) {
      Node* r = g_.roots[i];
      current_root_ = r->id;
      if (r->kind == NodeKind::Reduce) {
        std::vector<Node*> batch = reduction_batch(i);
        row_pass_ = ++passes_;
        write_reduce_pass(batch, row, reduced, first_pass ? folded : std::vector<Node*>());
        first_pass = false;
        row_pass_ = -1;
        i += batch.size();
        continue;
      }
      if (std::count(folded.begin(), folded.end(), r)) {  // (written with the first pass)
        ++i;
        continue;
      }
      if (stores_over_a_read(g_, r)) {
        last.push_back(r);
      } else {
        write_root(r);
      }
      ++i;
    }
    for (Node* r : last) write_root(r);
    scopes_.pop_back();
    --indent_;
    line("}");
    scopes_.pop_back();
  }

  // The reduction root at `i` and the adjacent reductions independent of it:
  // they share one pass over the row.
  std::vector<Node*> reduction_batch(size_t i) {
    std::vector<Node*> batch = {g_.roots[i]};
    while (i + batch.size() < g_.roots.size()) {
      Node* next = g_.roots[i + batch.size()];
      if (next->kind != NodeKind::Reduce || depends_on_any(next, batch)) break;
      batch.push_back(next);
    }
    return batch;
  }

  // The flat position in the row of the reduced coordinates, for row cache
  // arrays: for rows of known, modest length; for rows of symbolic length,
  // arrays of kRowCacheMax, used when the row fits (row_cache_condition).
  void plan_row_cache(const std::vector<int64_t>& reduced) {
    Expr len_expr(1);
    for (int64_t d : reduced) len_expr = len_expr * g_.shape[d];
    const bool symbolic = !len_expr.is_const();
    const int64_t len = symbolic ? kRowCacheMax : len_expr.value();
    // The coordinates the row loops give (written to a scratch body).
    std::vector<Expr> c;
    std::string body = std::move(body_);
    const int indent = indent_;
    const size_t merged = merged_vars_.size();
    open_row_loops(std::vector<Expr>(g_.shape.size(), Expr(0)), reduced, c, "");
    body_ = std::move(body);
    indent_ = indent;
    merged_vars_.resize(merged);
    Expr flat(0);
    for (int64_t d : reduced) flat = flat * g_.shape[d] + c[d];
    if (len > kRowCacheMax) return;
    row_len_ = len;
    row_flat_ = flat.key();
    if (symbolic) row_len_key_ = len_expr.key();
  }

  std::vector<Expr> row_coords(Node* r, const std::vector<Expr>& row) {
    if (r->shape.size() == g_.shape.size()) return row;  // kept shape (1s at reduced dims)
    std::vector<Expr> c;
    for (size_t i = 0; i < g_.shape.size(); ++i)
      if (!std::count(g_.dims.begin(), g_.dims.end(), static_cast<int64_t>(i))) c.push_back(row[i]);
    return c;
  }

  bool depends_on_any(Node* n, const std::vector<Node*>& set) {
    std::vector<Node*> work = {n};
    std::map<int, bool> seen;
    while (!work.empty()) {
      Node* x = work.back();
      work.pop_back();
      if (seen[x->id]) continue;
      seen[x->id] = true;
      if (x != n && std::find(set.begin(), set.end(), x) != set.end()) return true;
      if (x != n && is_materialized(x) && !current_roots_.count(x->id)) continue;
      for (Node* in : x->inputs) work.push_back(in);
    }
    return false;
  }

  // The loops over a row's reduced dims: one per dim, the innermost ones
  // merged (merged_tail); `c` gets the row's coordinates. `partials` (a
  // partial sum -> the sum it adds into, with its type) run the innermost
  // loop in chunks of kPartialSumChunk, each summed into the partial, which
  // starts at zero per chunk.
  void open_row_loops(const std::vector<Expr>& row, const std::vector<int64_t>& reduced, std::vector<Expr>& c,
                      const std::string& pragma, const std::vector<PartialSum>& partials = {}) {
    c = row;
    if (reduced.empty()) return;
    std::vector<int64_t> inner = merged_tail(reduced);
    for (size_t j = 0; j + inner.size() < reduced.size(); ++j) {
      int64_t d = reduced[j];
      std::string var = "r" + std::to_string(d);
      line("for (int64_t " + var + " = 0; " + var + " < " + g_.shape[d].key() + "; ++" + var + ") {");
      ++indent_;
      c[d] = Expr::symbol(var);
    }
    std::string var = open_merged("r", inner, c);
    std::string from = "0", to = extent(inner).key();
    if (!partials.empty()) {
      const std::string chunk = std::to_string(kPartialSumChunk);
      line("for (int64_t " + var + "c = 0; " + var + "c < " + to + "; " + var + "c += " + chunk + ") {");
      ++indent_;
      line("const int64_t " + var + "e = on_min(" + to + ", " + var + "c + " + chunk + ");");
      for (const PartialSum& p : partials) line(p.type + " " + p.partial + " = 0;");
      from = var + "c";
      to = var + "e";
    }
    if (!pragma.empty()) line(pragma);
    line("for (int64_t " + var + " = " + from + "; " + var + " < " + to + "; ++" + var + ") {");
    ++indent_;
  }
  void close_row_loops(const std::vector<int64_t>& reduced, const std::vector<PartialSum>& partials = {}) {
    const size_t loops = reduced.empty() ? 0 : reduced.size() - merged_tail(reduced).size() + 1;
    for (size_t j = 0; j < loops; ++j) {
      --indent_;
      line("}");
      if (j == 0 && !partials.empty()) {
        for (const PartialSum& p : partials) line(p.sum + " += " + p.partial + ";");
        --indent_;
        line("}");
      }
    }
  }

  // One pass over the row computing every reduction of `batch`. The loop is
  // an OpenMP simd reduction, so it vectorises; a floating max/min keeps a
  // NaN flag beside it, since a vector max drops NaNs and PyTorch keeps them.
  void write_reduce_pass(const std::vector<Node*>& batch, const std::vector<Expr>& row,
                         const std::vector<int64_t>& reduced, const std::vector<Node*>& stores) {
    static const std::map<std::string, std::string> combiner = {
        {"sum", "+"}, {"prod", "*"}, {"max", "max"}, {"min", "min"}, {"any", "||"}, {"all", "&&"}};
    std::map<std::string, std::vector<std::string>> clauses;  // combiner -> variables
    std::vector<PartialSum> partials;
    std::map<int, std::string> into;  // reduction -> the variable the loop accumulates into
    for (Node* r : batch) {
      std::string id = local(r);
      if (has_nan_flag(r)) {
        line("int nan" + id + " = 0;");
        clauses["|"].push_back("nan" + id);
      }
      line(accumulator_ctype(r) + " acc" + id + " = " + reduction_init(r) + ";");
      into[r->id] = "acc" + id;
      if (r->op == "sum" && accumulator_ctype(r) != compute_ctype(r->compute) && !reduced.empty()) {
        partials.push_back({compute_ctype(r->compute), "acc" + id + "p", "acc" + id});
        into[r->id] = partials.back().partial;
      }
      clauses[combiner.at(r->op)].push_back(into[r->id]);
    }
    std::string pragma = "#pragma omp simd";
    for (auto& [op, vars] : clauses) {
      pragma += " reduction(" + op + ":";
      for (size_t i = 0; i < vars.size(); ++i) pragma += (i ? "," : "") + vars[i];
      pragma += ")";
    }
    std::vector<Expr> c;
    open_row_loops(row, reduced, c, pragma, partials);
    scopes_.emplace_back();
    for (Node* r : batch) {
      current_root_ = r->id;
      std::string t = compute_ctype(r->compute);
      std::string v = "static_cast<" + t + ">(" + emit(r->inputs[0], c) + ")";
      accumulate(r, into[r->id], "nan" + local(r), v);
    }
    for (Node* r : stores) {
      current_root_ = r->id;
      store(r, c, emit(r, c));
    }
    scopes_.pop_back();
    close_row_loops(reduced, partials);
    for (Node* r : batch) {
      std::string id = local(r);
      std::string acc = "acc" + id;
      if (has_nan_flag(r))
        line("if (nan" + id + ") " + acc + " = std::numeric_limits<" + compute_ctype(r->compute) + ">::quiet_NaN();");
      std::string value = reduction_value(r, acc);
      accumulators_[r->id] = value;
      if (r->materialize) store(r, row, value);
    }
  }

  // ---- column reductions ----------------------------------------------------
  // When the innermost dim is kept (a sum over the batch of a [N, C] tensor:
  // bias gradients, norm weight gradients), rows are reduced into arrays of
  // accumulators, a tile of columns at a time, so every load is contiguous
  // and the inner loop vectorises across columns. Tiles run in parallel.
  // Only for groups without full-size epilogues (those need the finished
  // reduction at every element of the row, which this order cannot give).
  // Full-size stores are written by the first pass, from the values it
  // computes anyway (a weight's gradient summed over rows beside the
  // chain's value kept: 0.53 ms as rows of strided columns, 0.04 as
  // columns, 128K floats); one that needs a reduction would take a pass of
  // its own: rows then.
  bool column_schedule_applies(const std::vector<int64_t>& kept) const {
    if (kept.empty() || kept.back() != static_cast<int64_t>(g_.shape.size()) - 1) return false;
    const std::vector<Node*> folded = stores_for_the_first_pass(g_);
    for (Node* r : g_.roots)
      if (r->kind != NodeKind::Reduce && r->shape == g_.shape && !std::count(folded.begin(), folded.end(), r))
        return false;
    return true;
  }

  // A float32 sum accumulates in double: a row summed in one order drifts
  // from PyTorch's cascade sums by more than float32's tolerance at a few
  // hundred elements. A row pass sums float partials of kPartialSumChunk
  // elements (vector lanes of 32-64 elements each) into it: as accurate,
  // and the loop keeps float's vector width (softmax's exp-and-sum pass
  // 2.25 -> 2.0 ms on a Sapphire Rapids Xeon).
  static std::string accumulator_ctype(const Node* r) {
    if (r->op == "sum" && r->compute == DType::Float32) return "double";
    return compute_ctype(r->compute);
  }

  // A floating max/min keeps a NaN flag beside its accumulator.
  static bool has_nan_flag(const Node* r) {
    return (r->op == "max" || r->op == "min") && is_floating(r->compute);
  }

  // The finished reduction `acc` as a value of `r`: a 16-bit result is
  // rounded once per row, as PyTorch's kernel does.
  std::string reduction_value(const Node* r, const std::string& acc) {
    if (r->dtype == DType::Float16 || r->dtype == DType::BFloat16)
      return "static_cast<float>(static_cast<" + std::string(storage_ctype(r->dtype)) + ">(" + acc + "))";
    return "static_cast<" + value_type(r) + ">(" + acc + ")";
  }

  static std::string reduction_init(const Node* r) {
    std::string t = compute_ctype(r->compute);
    if (r->op == "sum") return "0";
    if (r->op == "prod") return "1";
    if (r->op == "any") return "false";
    if (r->op == "all") return "true";
    if (r->op != "max" && r->op != "min") throw CompileError("unknown reduction " + r->op);
    if (is_floating(r->compute))
      return std::string(r->op == "max" ? "-" : "") + "std::numeric_limits<" + t + ">::infinity()";
    return "std::numeric_limits<" + t + ">::" + (r->op == "max" ? "lowest()" : "max()");
  }

  // `acc op= v` for one reduction, `nan` the NaN flag of a floating max/min.
  void accumulate(const Node* r, const std::string& acc, const std::string& nan, const std::string& v) {
    std::string t = compute_ctype(r->compute);
    if (r->op == "sum") line(acc + " += " + v + ";");
    else if (r->op == "prod") line(acc + " *= " + v + ";");
    else if (r->op == "any") line(acc + " = " + acc + " || " + v + ";");
    else if (r->op == "all") line(acc + " = " + acc + " && " + v + ";");
    else {
      std::string cmp = r->op == "max" ? " > " : " < ";
      std::string flag = is_floating(r->compute) ? " " + nan + " |= (x != x);" : "";
      line("{ const " + t + " x = " + v + ";" + flag + " " + acc + " = x" + cmp + acc + " ? x : " + acc + "; }");
    }
  }

  void write_column_reduction(const std::vector<int64_t>& kept, const std::vector<int64_t>& reduced) {
    const int64_t last = kept.back();
    const std::vector<int64_t> outer(kept.begin(), kept.end() - 1);
    const Expr& width = g_.shape[last];
    Expr outer_count(1), rows(1);
    for (int64_t d : outer) outer_count = outer_count * g_.shape[d];
    for (int64_t d : reduced) rows = rows * g_.shape[d];
    const std::string col = "k" + std::to_string(last);
    indent_ = 1;
    scopes_.emplace_back();
    line("const int64_t width = " + width.key() + ", outer = " + outer_count.key() + ";");
    line("const int64_t per_outer = std::max<int64_t>(1, on_threads / std::max<int64_t>(outer, 1));");
    line("const int64_t tile = std::min<int64_t>(" + std::to_string(kColumnTile) +
         ", std::max<int64_t>(64, ((width + per_outer - 1) / per_outer + 15) / 16 * 16));");
    line("const int64_t tiles = (width + tile - 1) / tile;");
    parallel_pragma(outer_count * width * rows);
    line("for (int64_t to = 0; to < outer * tiles; ++to) {");
    ++indent_;
    std::vector<Expr> row(g_.shape.size(), Expr(0));
    decompose("(to / tiles)", "k", outer, row);
    line("const int64_t c0 = (to % tiles) * tile;");
    line("const int64_t tw = std::min<int64_t>(tile, width - c0);");
    begin_hoisting(row);
    row[last] = Expr::symbol(col);
    row_key_ = join_keys(row);
    for (Node* r : g_.roots) current_roots_.insert(r->id);
    std::vector<Node*> folded = stores_for_the_first_pass(g_);
    size_t i = 0;
    while (i < g_.roots.size()) {
      Node* r = g_.roots[i];
      current_root_ = r->id;
      if (std::count(folded.begin(), folded.end(), r)) {  // (written with the first pass)
        ++i;
        continue;
      }
      if (r->kind != NodeKind::Reduce) {
        column_loop(col, [&] { store(r, row_coords(r, row), emit(r, row_coords(r, row))); });
        ++i;
        continue;
      }
      std::vector<Node*> batch = reduction_batch(i);
      write_column_pass(batch, row, reduced, col, folded);
      folded.clear();
      i += batch.size();
    }
    --indent_;
    line("}");
    scopes_.pop_back();
  }

  // `for t in tile: body`, vectorised, with the column coordinate defined.
  template <typename Body>
  void column_loop(const std::string& col, Body body) {
    line("#pragma omp simd");
    line("for (int64_t t = 0; t < tw; ++t) {");
    ++indent_;
    line("const int64_t " + col + " = c0 + t; (void)" + col + ";");
    scopes_.emplace_back();
    body();
    scopes_.pop_back();
    --indent_;
    line("}");
  }

  void write_column_pass(const std::vector<Node*>& batch, const std::vector<Expr>& row,
                         const std::vector<int64_t>& reduced, const std::string& col,
                         const std::vector<Node*>& stores) {
    const std::string tile = std::to_string(kColumnTile);
    for (Node* r : batch) {
      std::string id = local(r);
      line(accumulator_ctype(r) + " acc" + id + "[" + tile + "];");
      bool flag = has_nan_flag(r);
      if (flag) line("int nan" + id + "[" + tile + "];");
      line("for (int64_t t = 0; t < tw; ++t) { acc" + id + "[t] = " + reduction_init(r) + ";" +
           (flag ? " nan" + id + "[t] = 0;" : "") + " }");
    }
    std::vector<Expr> c;
    open_row_loops(row, reduced, c, "");
    column_loop(col, [&] {
      for (Node* r : batch) {
        current_root_ = r->id;
        std::string id = local(r);
        std::string v = "static_cast<" + std::string(compute_ctype(r->compute)) + ">(" + emit(r->inputs[0], c) + ")";
        accumulate(r, "acc" + id + "[t]", "nan" + id + "[t]", v);
      }
      for (Node* r : stores) {
        current_root_ = r->id;
        store(r, c, emit(r, c));
      }
    });
    close_row_loops(reduced);
    for (Node* r : batch) {
      std::string id = local(r);
      if (has_nan_flag(r))
        line("for (int64_t t = 0; t < tw; ++t) if (nan" + id + "[t]) acc" + id + "[t] = std::numeric_limits<" +
             compute_ctype(r->compute) + ">::quiet_NaN();");
      std::string value = reduction_value(r, "acc" + id + "[t]");
      accumulators_[r->id] = value;
      if (r->materialize) column_loop(col, [&] { store(r, row, value); });
    }
  }

  void write_epilogue(Node* r, const std::vector<Expr>& row, const std::vector<int64_t>& reduced) {
    std::vector<Expr> c;
    open_row_loops(row, reduced, c, "#pragma omp simd");
    scopes_.emplace_back();
    store(r, c, emit(r, c));
    scopes_.pop_back();
    close_row_loops(reduced);
  }

  const KernelGroup& g_;
  std::string name_;
  std::vector<std::string> symbols_;
  size_t merge_dims_;
  std::vector<std::string> merged_vars_;  // loop variables over merged dims
  std::string body_;
  std::string prologue_;                  // host values, before the loops
  std::map<int, std::string> host_values_;  // node id -> variable
  int indent_ = 1;
  int open_ = 0;
  int counter_ = 0;
  std::map<const Node*, size_t> local_ids_;  // local()
  std::vector<std::map<std::string, std::string>> scopes_;
  std::map<int, std::string> accumulators_;  // reductions of the current row
  std::string row_key_;   // the coordinates of the current row
  int current_root_ = -1;
  std::set<int> current_roots_;
  std::map<const Node*, std::pair<Node*, Expr>> stored_inputs_;  // input -> (its store, element index)
  std::vector<Node*> reads_, outputs_;
  std::set<std::string> hoistable_;       // symbols fixed for the current row
  std::map<std::string, std::string> hoisted_;  // index expression -> variable
  size_t hoist_pos_ = std::string::npos;  // where hoisted definitions go in body_
  int hoist_indent_ = 0;
  // Row cache (row reductions): which values to keep, which were kept where.
  std::set<std::string> cache_keys_;
  std::map<std::string, std::string> row_cache_;        // node@coordinates -> array
  std::map<std::string, std::set<int>> key_passes_;     // node@coordinates -> passes computing it
  std::set<std::string> costly_keys_;
  int row_pass_ = -1, passes_ = 0;  // the pass over the row being written (-1: none)
  int64_t row_len_ = 0;
  std::string row_flat_;            // C++ flat index within the row; empty: no row cache
  std::string row_len_key_;         // C++ row length when symbolic (row_cache_condition)
};

}  // namespace

std::string entry_info_source(const std::string& name, int bindings, int scalars) {
  return "extern \"C\" const int64_t " + name + "_info[5] = {" + std::to_string(bindings) + ", " +
         std::to_string(scalars) + ", 1, 1, 1};\n";
}

GeneratedKernel generate_kernel(const KernelGroup& group, const std::string& name,
                                const std::vector<std::string>& symbols) {
  auto write = [&](size_t merge_dims) {
    KernelWriter first(group, name, symbols, merge_dims);
    const GeneratedKernel first_kernel = first.run();
    std::set<std::string> keep = first.recomputed_costly_values();
    if (keep.empty()) return std::make_pair(first_kernel, first.merged_loop_divides());
    KernelWriter second(group, name, symbols, merge_dims, std::move(keep));
    second.name_nodes_as(first);
    GeneratedKernel k = second.run();
    // A row of symbolic length: the cached loops where it fits, the first
    // writer's (computing those values again) where it does not.
    const std::string fits = second.row_cache_condition();
    auto sorted = [](std::vector<Node*> v) { return std::sort(v.begin(), v.end()), v; };
    if (fits.empty() || sorted(first_kernel.buffers) != sorted(k.buffers))
      return std::make_pair(k, second.merged_loop_divides());
    k = second.assemble("  if (" + fits + ")\n" + second.loops() + "  else\n" + first.loops());
    return std::make_pair(k, second.merged_loop_divides() || first.merged_loop_divides());
  };
  // The most innermost dims one loop can take without a division per
  // element (a dim whose stride does not span the ones inside it stops it).
  for (size_t dims = group.shape.size(); dims > 1; --dims) {
    auto [k, divides] = write(dims);
    if (!divides) return k;
  }
  return write(1).first;
}

}  // namespace openneuron::compiler
