#include "compiler/codegen/glsl_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "compiler/codegen/glsl_pointwise.h"
#include "compiler/codegen/reduction_stores.h"
#include "compiler/ir/errors.h"
#include "compiler/ir/view_coords.h"

namespace openneuron::compiler {
namespace {

// An index or size expression as GLSL (int64_t arithmetic; the prelude
// defines on_floordiv and on_mod).
std::string expr_glsl(const Expr& e) {
  auto join = [](const std::vector<Expr>& ops, const char* sep) {
    std::string out;
    for (size_t i = 0; i < ops.size(); ++i) out += (i ? sep : "") + expr_glsl(ops[i]);
    return out;
  };
  switch (e.kind()) {
    case Expr::Kind::Const: return "int64_t(" + std::to_string(e.value()) + "L)";
    case Expr::Kind::Sym: return e.name();
    case Expr::Kind::Add: return "(" + join(e.operands(), " + ") + ")";
    case Expr::Kind::Mul: return "(" + join(e.operands(), " * ") + ")";
    case Expr::Kind::FloorDiv: return "on_floordiv(" + join(e.operands(), ", ") + ")";
    case Expr::Kind::Mod: return "on_mod(" + join(e.operands(), ", ") + ")";
    case Expr::Kind::Max: return "max(" + join(e.operands(), ", ") + ")";
    case Expr::Kind::Min: return "min(" + join(e.operands(), ", ") + ")";
  }
  return "";
}

// The GLSL type of a symbolic value: a float symbol's type (SymFloat,
// "fs_" names) when it involves one, else int64_t.
std::string expr_type(const Expr& e, const std::string& float_symbol_type) {
  std::set<std::string> symbols;
  e.collect_symbols(symbols);
  for (const std::string& s : symbols)
    if (s.rfind("fs_", 0) == 0) return float_symbol_type;
  return "int64_t";
}

// The first float64 (or complex128) value the group computes or loads, or
// null. Buffers it loads end the walk: how another group or an extern made
// them is not this kernel's arithmetic.
const Node* float64_value(const KernelGroup& g) {
  std::vector<const Node*> work(g.roots.begin(), g.roots.end());
  std::set<int> seen;
  while (!work.empty()) {
    const Node* n = work.back();
    work.pop_back();
    if (!seen.insert(n->id).second) continue;
    if (n->dtype == DType::Float64 || n->compute == DType::Float64 || n->dtype == DType::Complex128) return n;
    if (loaded(g, n)) continue;
    for (const Node* in : n->inputs) work.push_back(in);
  }
  return nullptr;
}

// `expr` of GLSL type `from` as type `to` (bools convert by comparison).
std::string convert(const std::string& expr, const std::string& from, const std::string& to) {
  if (from == to) return expr;
  if (to == "bool") return "(" + expr + " != " + from + "(0))";
  if (from == "bool") return "(" + expr + " ? " + to + "(1) : " + to + "(0))";
  return to + "(" + expr + ")";
}

std::string literal(double v, bool is_int, const std::string& t) {
  if (t == "bool") return v != 0 ? "true" : "false";
  if (std::isnan(v)) return t + "(ON_NAN)";
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + t + "(ON_INF)";
  char buf[48];
  if (t == "int64_t" || (is_int && std::fabs(v) < 9.2e18 && t != "float" && t != "double")) {
    std::snprintf(buf, sizeof buf, "%lldL", static_cast<long long>(v));
    return convert(buf, "int64_t", t);
  }
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string text = buf;
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return t == "double" ? "double(" + text + "LF)" : "float(" + text + ")";
}

bool yields_bool(const std::string& op) {
  static const std::set<std::string> ops = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                                            "logical_or", "logical_xor", "logical_not", "isnan",
                                            "signbit"};
  return ops.count(op) > 0;
}

int storage_bytes(DType d) { return d == DType::Bool ? 1 : itemsize(d); }

class GlslKernelWriter {
 public:
  GlslKernelWriter(const KernelGroup& g, const std::string& name, const std::vector<std::string>& symbols,
                   bool fp64)
      : g_(g), name_(name), symbols_(symbols), float_symbol_type_(fp64 ? "double" : "float") {}

  GeneratedKernel run() {
    indent_ = 1;
    if (g_.kind == KernelGroup::Kind::Pointwise) write_pointwise();
    else write_reduction();
    std::vector<Node*> order = reads_;
    for (Node* o : outputs_) order.push_back(o);
    const int bindings = static_cast<int>(order.size()), scalars = static_cast<int>(symbols_.size());
    std::string src = glsl_entry_preamble(name_, bindings, scalars, kGlslWorkgroupSize,
                                          std::vector<std::string>(ref_types_.begin(), ref_types_.end()));
    src += shared_;
    src += "void main() {\n";
    for (size_t i = 0; i < symbols_.size(); ++i) {
      const std::string& s = symbols_[i];
      const std::string slot = "on_args.s[" + std::to_string(i) + "]";
      if (s.rfind("fs_", 0) == 0)  // float symbols (SymFloat) arrive as a double's bits
        src += "  const " + float_symbol_type_ + " " + s + " = " +
               (float_symbol_type_ == "double" ? "int64BitsToDouble(" : "on_double_bits(") + slot + ");\n";
      else
        src += "  const int64_t " + s + " = " + slot + ";\n";
    }
    for (size_t i = 0; i < order.size(); ++i)
      src += "  const uint64_t " + buffer_name(order[i]) + " = on_args.b[" + std::to_string(i) + "];\n";
    src += "  const int64_t on_first = int64_t(gl_GlobalInvocationID.x);\n";
    src += "  const int64_t on_lid = int64_t(gl_LocalInvocationID.x);\n";
    src += "  const uint on_li = gl_LocalInvocationID.x;  // shared-memory index\n";
    src += "  const int64_t on_step = int64_t(gl_NumWorkGroups.x) * " + std::to_string(kGlslWorkgroupSize) + "L;\n";
    GeneratedKernel k;
    k.name = name_;
    k.source = src + prologue_ + body_ + "}\n";
    k.buffers = order;
    k.num_outputs = static_cast<int>(outputs_.size());
    return k;
  }

 private:
  void line(const std::string& s) { body_ += std::string(indent_ * 2, ' ') + s + "\n"; }
  std::string fresh() { return "v" + std::to_string(counter_++); }
  // Names in the source number a node within this kernel, never by its id in
  // the graph: identical kernels (a model's layers) get identical source.
  std::string local(const Node* n) {
    return std::to_string(local_ids_.emplace(n, local_ids_.size()).first->second);
  }
  std::string buffer_name(const Node* n) { return "b" + local(n); }
  std::string value_type(const Node* n) const { return glsl_compute_type(compute_dtype(n->dtype)); }
  bool is_materialized(const Node* n) const {
    return n->kind == NodeKind::Input || n->kind == NodeKind::ExternOutput || n->materialize;
  }

  void note_read(Node* n) {
    if (std::find(reads_.begin(), reads_.end(), n) == reads_.end() &&
        std::find(outputs_.begin(), outputs_.end(), n) == outputs_.end())
      reads_.push_back(n);
  }

  // The element at flat index `idx` of `n`'s buffer, as a reference.
  std::string element(const Node* n, const Expr& idx) {
    const std::string t = glsl_storage_type(n->dtype);
    ref_types_.insert(t);
    return "OnRef_" + t + "(" + buffer_name(n) + " + uint64_t(" + expr_glsl(idx) + ") * " +
           std::to_string(storage_bytes(n->dtype)) + "ul).v";
  }

  std::string load(Node* n, const std::vector<Expr>& strides, const Expr& offset, const std::vector<Expr>& c) {
    note_read(n);
    Expr idx = offset;
    for (size_t i = 0; i < c.size(); ++i) idx = idx + c[i] * strides[i];
    auto stored = stored_inputs_.find(n);
    if (stored != stored_inputs_.end() && stored->second.second != idx)
      throw ExternNeeded(stored->second.first->fx_name, "store before a read of another element");
    const std::string raw = element(n, idx);
    const std::string vt = value_type(n);
    if (n->dtype == DType::BFloat16) return "on_bf16_load(" + raw + ")";
    if (n->dtype == DType::Bool) return "(" + raw + " != uint8_t(0))";
    // Lavapipe (Mesa 22.3) zero-extends an int32 read from a buffer
    // reference into int64 (abs(-3) gave -3); the sign is extended by hand.
    if (n->dtype == DType::Int32 && vt == "int64_t") return "on_sext32(" + raw + ")";
    return convert(raw, glsl_storage_type(n->dtype), vt);
  }

  std::string emit(Node* n, const std::vector<Expr>& c) {
    if (n->host && n->is_compute()) return host_value(n);
    const std::string key = std::to_string(n->id) + "@" + join_keys(c);
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(key); f != it->end()) return f->second;
    const std::string expr = rounded_to_dtype(n, compute(n, c));
    const std::string var = fresh();
    line("const " + value_type(n) + " " + var + " = " + expr + ";");
    scopes_.back()[key] = var;
    return var;
  }

  std::string host_value(Node* n) {
    if (auto it = host_values_.find(n->id); it != host_values_.end()) return it->second;
    std::string loops = std::move(body_);
    body_.clear();
    const int indent = indent_;
    indent_ = 1;
    auto scopes = std::move(scopes_);
    scopes_.assign(1, {});
    const std::string expr = compute(n, {});
    const std::string var = fresh();
    line("const " + value_type(n) + " " + var + " = " + expr + ";");
    scopes_ = std::move(scopes);
    prologue_ += body_;
    body_ = std::move(loops);
    indent_ = indent;
    host_values_[n->id] = var;
    return var;
  }

  // An integer Python number (a float symbol: its double's bits) that an
  // integer value takes, on a device without float64: its argument slot,
  // read exactly, where the float symbol's float32 would round it past
  // 2^24. "" otherwise.
  std::string exact_integer_slot(const Node* n) const {
    const Expr& e = n->view_args[0];
    if (!n->scalar_is_int || float_symbol_type_ != "float" || e.kind() != Expr::Kind::Sym ||
        is_floating(compute_dtype(n->dtype)) || n->dtype == DType::Bool)
      return "";
    const auto it = std::find(symbols_.begin(), symbols_.end(), e.name());
    if (it == symbols_.end() || e.name().rfind("fs_", 0) != 0) return "";
    return "on_args.s[" + std::to_string(it - symbols_.begin()) + "]";
  }

  std::string compute(Node* n, const std::vector<Expr>& c) {
    if (n->kind == NodeKind::Reduce && accumulators_.count(n->id)) {
      if (join_keys(c) != row_key_) throw FusionConflict(current_root_);
      return accumulators_[n->id];
    }
    if (is_materialized(n) && !current_roots_.count(n->id)) return load(n, n->buffer_strides(), Expr(0), c);
    switch (n->kind) {
      case NodeKind::Constant:
        if (!n->view_args.empty()) {
          if (const std::string slot = exact_integer_slot(n); !slot.empty())
            return convert("on_double_bits_int(" + slot + ")", "int64_t", value_type(n));
          return convert(expr_glsl(n->view_args[0]), expr_type(n->view_args[0], float_symbol_type_), value_type(n));
        }
        return literal(n->scalar, n->scalar_is_int, value_type(n));
      case NodeKind::View: return emit_view(n, c);
      case NodeKind::Pointwise:
        if (n->op == "iota") return convert(expr_glsl(c[0]), "int64_t", value_type(n));
        return emit_pointwise(n, c);
      default: break;
    }
    throw CompileError(std::string("kernel cannot compute a ") + kind_name(n->kind) + " node here");
  }

  std::string emit_pointwise(Node* n, const std::vector<Expr>& c) {
    const std::string ct = glsl_compute_type(n->compute);
    std::vector<std::string> args;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const std::string v = emit(n->inputs[i], c);
      const std::string t = (n->op == "where" && i == 0) ? "bool" : ct;
      args.push_back(convert(v, value_type(n->inputs[i]), t));
    }
    while (args.size() < 3) args.push_back("");
    const std::string r = pointwise_glsl(n->op, ct, args[0], args[1], args[2]);
    const std::string rt = yields_bool(n->op) ? "bool" : ct;
    const std::string vt = value_type(n);
    // A cast to a 16-bit float rounds to it, as the stored value would be.
    if (n->op == "identity" && (n->dtype == DType::Float16 || n->dtype == DType::BFloat16))
      return rounded_16bit(r, n->dtype);
    return wrap_to_dtype(convert(r, rt, vt), n->dtype);
  }

  // A float value rounded to a 16-bit float `d` and back, as storing it does.
  static std::string rounded_16bit(const std::string& v, DType d) {
    return d == DType::Float16 ? "float(float16_t(" + v + "))" : "on_bf16_load(on_bf16_store(" + v + "))";
  }
  // An eager op's 16-bit float result, rounded as its stored value is
  // (Node::rounds_to_dtype).
  static std::string rounded_to_dtype(const Node* n, const std::string& v) {
    const bool sixteen_bit = n->dtype == DType::Float16 || n->dtype == DType::BFloat16;
    return n->rounds_to_dtype && sixteen_bit ? rounded_16bit(v, n->dtype) : v;
  }

  // A narrower integer's value (held as int64) wrapped to its type, as the
  // stored value and the CPU's arithmetic in that type are (uint8 200 + 200
  // is 144, also when fused into a cast to float): masks and a sign flip,
  // int64 arithmetic only (no 8/16-bit arithmetic capability needed).
  static std::string wrap_to_dtype(const std::string& v, DType d) {
    switch (d) {
      case DType::UInt8: return "((" + v + ") & 0xFFL)";
      case DType::Int8: return "((((" + v + ") & 0xFFL) ^ 0x80L) - 0x80L)";
      case DType::Int16: return "((((" + v + ") & 0xFFFFL) ^ 0x8000L) - 0x8000L)";
      case DType::Int32: return "((((" + v + ") & 0xFFFFFFFFL) ^ 0x80000000L) - 0x80000000L)";
      default: return v;
    }
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
      inside += std::string(inside.empty() ? "" : " && ") + "(" + expr_glsl(at) + ") >= 0L && (" +
                expr_glsl(at) + ") < (" + expr_glsl(in->shape[d]) + ")";
    }
    const std::string value = emit(in, ic);
    if (inside.empty()) return value;
    return "((" + inside + ") ? " + value + " : " + literal(v->scalar, v->scalar_is_int, value_type(v)) + ")";
  }

  static Expr flat_index(const std::vector<Expr>& c, const std::vector<Expr>& strides) {
    Expr idx(0);
    for (size_t i = 0; i < c.size(); ++i) idx = idx + c[i] * strides[i];
    return idx;
  }

  void store(Node* root, const std::vector<Expr>& c, const std::string& value) {
    if (std::find(outputs_.begin(), outputs_.end(), root) == outputs_.end()) outputs_.push_back(root);
    const std::string target = element(root, flat_index(c, root->buffer_strides()));
    const std::string vt = value_type(root);
    std::string stored;
    if (root->dtype == DType::BFloat16) stored = "on_bf16_store(" + convert(value, vt, "float") + ")";
    else if (root->dtype == DType::Bool) stored = "(" + convert(value, vt, "bool") + " ? uint8_t(1) : uint8_t(0))";
    else stored = convert(value, vt, glsl_storage_type(root->dtype));
    line(target + " = " + stored + ";");
  }

  // Coordinates of flat index `flat` (0 <= flat < the dims' extent) over
  // `dims` of the group's shape. GPUs emulate 64-bit division (dozens of
  // instructions; 32-bit is a few), so where the extent fits in 31 bits the
  // divisions are 32-bit: decided here for constant extents, else by a
  // branch the whole dispatch takes alike. The outermost dim needs none.
  void decompose(const std::string& flat, const std::string& prefix, const std::vector<int64_t>& dims,
                 std::vector<Expr>& coord) {
    std::vector<int64_t> live;  // dims of size > 1, innermost first
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
      if (g_.shape[*it].equals(1)) {
        coord[*it] = Expr(0);
      } else {
        live.push_back(*it);
        coord[*it] = Expr::symbol(prefix + std::to_string(*it));
      }
    }
    if (live.empty()) return;
    if (live.size() == 1) {
      line("const int64_t " + prefix + std::to_string(live[0]) + " = " + flat + ";");
      return;
    }
    std::string declared = "int64_t";
    for (size_t i = 0; i < live.size(); ++i) declared += (i ? ", " : " ") + prefix + std::to_string(live[i]);
    line(declared + ";");
    auto divide = [&](bool narrow) {
      const std::string rest = prefix + "rest";
      line(std::string(narrow ? "uint " : "int64_t ") + rest + " = " + (narrow ? "uint(" + flat + ")" : flat) + ";");
      for (size_t i = 0; i < live.size(); ++i) {
        const std::string var = prefix + std::to_string(live[i]);
        if (i + 1 == live.size()) {
          line(var + " = " + (narrow ? "int64_t(" + rest + ")" : rest) + ";");
          break;
        }
        const std::string size = narrow ? "uint(" + expr_glsl(g_.shape[live[i]]) + ")" : expr_glsl(g_.shape[live[i]]);
        const std::string mod = rest + " % " + size;
        line(var + " = " + (narrow ? "int64_t(" + mod + ")" : mod) + "; " + rest + " /= " + size + ";");
      }
    };
    const Expr n = extent(dims);
    constexpr int64_t kNarrow = 2147483647;
    if (n.is_const()) {
      line("{");
      divide(n.value() <= kNarrow);
      line("}");
      return;
    }
    line("if (" + expr_glsl(n) + " <= " + std::to_string(kNarrow) + "L) {");
    divide(true);
    line("} else {");
    divide(false);
    line("}");
  }

  Expr extent(const std::vector<int64_t>& dims) const {
    Expr n(1);
    for (int64_t d : dims) n = n * g_.shape[d];
    return n;
  }

  // for (var = first; var < end; var += step). lavapipe stops an invocation
  // after 65535 loop trips in all (silently), so callers keep the trips per
  // invocation few: grids sized to the work, row loops unrolled.
  void open_loop(const std::string& var, const std::string& first, const std::string& end,
                 const std::string& step) {
    line("for (int64_t " + var + " = " + first + "; " + var + " < " + end + "; " + var + " += " + step + ") {");
    ++indent_;
  }
  void open_grid_loop(const std::string& var, const Expr& count) {
    open_loop(var, "on_first", expr_glsl(count), "on_step");
  }
  void close_loop() {
    --indent_;
    line("}");
  }

  void write_pointwise() {
    for (Node* r : g_.roots) current_roots_.insert(r->id);
    scopes_.emplace_back();
    std::vector<int64_t> all(g_.shape.size());
    for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
    std::vector<Expr> c(g_.shape.size(), Expr(0));
    open_grid_loop("on_i", extent(all));
    decompose("on_i", "i", all, c);
    for (Node* r : g_.roots)
      if (r->is_store()) stored_inputs_[r->store_into] = {r, flat_index(c, r->buffer_strides())};
    scopes_.emplace_back();
    std::vector<std::string> values;
    for (Node* r : g_.roots) values.push_back(emit(r, c));
    for (size_t i = 0; i < g_.roots.size(); ++i) store(g_.roots[i], c, values[i]);
    scopes_.pop_back();
    close_loop();
    scopes_.pop_back();
  }

  // ---- reductions: a workgroup per row, or an invocation per short row ----
  // Long rows: the workgroup's invocations take the row's elements in turn,
  // each accumulating its share; the shares combine through shared memory
  // in a tree, and every invocation reads the finished value (later passes
  // and epilogues need it). Row scalars and reductions are stored by
  // invocation 0. Short rows (kShortRow elements or fewer): an invocation
  // takes whole rows, with no shared memory or barriers; a workgroup per
  // row of 2 spent nearly all its time in barriers (a sum over the last dim
  // of (2M, 2): 17 s on lavapipe). Sizes that are kernel scalars get both,
  // behind a branch every invocation takes alike.
  void write_reduction() {
    std::vector<int64_t> kept, reduced = g_.dims;
    for (size_t i = 0; i < g_.shape.size(); ++i)
      if (!std::count(reduced.begin(), reduced.end(), static_cast<int64_t>(i))) kept.push_back(i);
    reduced_ = reduced;
    const Expr length = extent(reduced_);
    if (length.is_const()) {
      short_rows_ = length.value() <= kShortRow;
      write_rows(kept);
      return;
    }
    line("if (" + expr_glsl(length) + " <= " + std::to_string(kShortRow) + "L) {  // short rows");
    ++indent_;
    short_rows_ = true;
    write_rows(kept);
    --indent_;
    line("} else {");
    ++indent_;
    short_rows_ = false;
    accumulators_.clear();
    write_rows(kept);
    --indent_;
    line("}");
  }
  static constexpr int64_t kShortRow = 32;

  void write_rows(const std::vector<int64_t>& kept) {
    scopes_.emplace_back();
    std::vector<Expr> row(g_.shape.size(), Expr(0));
    if (short_rows_) open_grid_loop("on_row", extent(kept));
    else open_loop("on_row", "int64_t(gl_WorkGroupID.x)", expr_glsl(extent(kept)), "int64_t(gl_NumWorkGroups.x)");
    decompose("on_row", "k", kept, row);
    scopes_.emplace_back();
    for (Node* r : g_.roots) current_roots_.insert(r->id);
    row_key_ = join_keys(row);
    const std::vector<Node*> folded = stores_for_the_first_pass(g_);
    std::vector<Node*> last;  // stores over what a later pass reads
    auto write_root = [&](Node* r) {
      current_root_ = r->id;
      if (r->shape == g_.shape) {
        for_row_elements(row, [&](const std::vector<Expr>& c) { store(r, c, emit(r, c)); });
        return;
      }
      open_first_invocation_only();
      scopes_.emplace_back();
      store(r, row_coords(r, row), emit(r, row_coords(r, row)));
      scopes_.pop_back();
      close_first_invocation_only();
    };
    bool first_pass = true;
    size_t i = 0;
    while (i < g_.roots.size()) {
      Node* r = g_.roots[i];
      current_root_ = r->id;
      if (r->kind == NodeKind::Reduce) {
        std::vector<Node*> batch = reduction_batch(i);
        row_ = row;
        write_reduce_pass(batch, row, first_pass ? folded : std::vector<Node*>());
        first_pass = false;
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
    if (!last.empty() && !short_rows_) line("barrier();  // every pass has read the row");
    for (Node* r : last) write_root(r);
    scopes_.pop_back();
    close_loop();
    scopes_.pop_back();
  }

  std::vector<Node*> reduction_batch(size_t i) {
    std::vector<Node*> batch = {g_.roots[i]};
    while (i + batch.size() < g_.roots.size()) {
      Node* next = g_.roots[i + batch.size()];
      if (next->kind != NodeKind::Reduce || depends_on_any(next, batch)) break;
      batch.push_back(next);
    }
    return batch;
  }

  bool depends_on_any(Node* n, const std::vector<Node*>& set) {
    std::vector<Node*> work = {n};
    std::set<int> seen;
    while (!work.empty()) {
      Node* x = work.back();
      work.pop_back();
      if (!seen.insert(x->id).second) continue;
      if (x != n && std::find(set.begin(), set.end(), x) != set.end()) return true;
      if (x != n && is_materialized(x) && !current_roots_.count(x->id)) continue;
      for (Node* in : x->inputs) work.push_back(in);
    }
    return false;
  }

  std::vector<Expr> row_coords(Node* r, const std::vector<Expr>& row) {
    if (r->shape.size() == g_.shape.size()) return row;
    std::vector<Expr> c;
    for (size_t i = 0; i < g_.shape.size(); ++i)
      if (!std::count(g_.dims.begin(), g_.dims.end(), static_cast<int64_t>(i))) c.push_back(row[i]);
    return c;
  }

  // Runs `body(c)` for each of this invocation's elements of the row (every
  // workgroup-size-th, from its local index; `c` their coordinates), the
  // loop unrolled kRowUnroll times: fewer loop trips (lavapipe allows an
  // invocation 65535 in all, so a row may hold up to 128 * 4 * 65535).
  template <typename Body>
  void for_row_elements(const std::vector<Expr>& row, Body body) {
    const std::string wg = std::to_string(kGlslWorkgroupSize), len = expr_glsl(extent(reduced_));
    if (short_rows_) {  // the invocation's own row, every element
      open_loop("on_e", "0L", len, "1L");
      std::vector<Expr> c = row;
      decompose("on_e", "r", reduced_, c);
      scopes_.emplace_back();
      body(c);
      scopes_.pop_back();
      close_loop();
      return;
    }
    open_loop("on_e0", "on_lid", len, std::to_string(kGlslWorkgroupSize * kRowUnroll) + "L");
    for (int k = 0; k < kRowUnroll; ++k) {
      line("{ const int64_t on_e = on_e0 + " + std::to_string(k * kGlslWorkgroupSize) + "L; if (on_e < " + len + ") {");
      ++indent_;
      std::vector<Expr> c = row;
      decompose("on_e", "r", reduced_, c);
      scopes_.emplace_back();
      body(c);
      scopes_.pop_back();
      --indent_;
      line("} }");
    }
    close_loop();
  }
  static constexpr int kRowUnroll = 4;

  static bool compensated(const Node* r) { return r->op == "sum" && r->compute != DType::Float64 && is_floating(r->compute); }
  static bool has_nan_flag(const Node* r) { return (r->op == "max" || r->op == "min") && is_floating(r->compute); }

  static std::string reduction_init(const Node* r) {
    const std::string t = glsl_compute_type(r->compute);
    if (r->op == "sum") return t + "(0)";
    if (r->op == "prod") return t + "(1)";
    if (r->op == "any") return "false";
    if (r->op == "all") return "true";
    if (r->op != "max" && r->op != "min") throw CompileError("unknown reduction " + r->op);
    if (is_floating(r->compute)) return std::string(r->op == "max" ? "-" : "") + t + "(ON_INF)";
    if (t == "bool") return r->op == "max" ? "false" : "true";
    return r->op == "max" ? "(-9223372036854775807L - 1L)" : "9223372036854775807L";
  }

  // `a = a op b` for two partial results of reduction `r`.
  static std::string combine(const Node* r, const std::string& a, const std::string& b) {
    if (r->op == "sum") return a + " = " + a + " + " + b + ";";
    if (r->op == "prod") return a + " = " + a + " * " + b + ";";
    if (r->op == "any") return a + " = " + a + " | " + b + ";";
    if (r->op == "all") return a + " = " + a + " & " + b + ";";
    return a + " = " + b + (r->op == "max" ? " > " : " < ") + a + " ? " + b + " : " + a + ";";
  }

  // The type shared memory holds a partial in (bools as uint: 0 or 1).
  static std::string shared_type(const Node* r) {
    const std::string t = glsl_compute_type(r->compute);
    return t == "bool" ? "uint" : t;
  }

  // One pass over the row accumulating every reduction of `batch`, and
  // writing `stores` (stores_for_the_first_pass) from the same values. Float
  // sums are compensated (Kahan) within each invocation's share; the shares
  // meet in a tree, which keeps the error of the combination small too.
  void write_reduce_pass(const std::vector<Node*>& batch, const std::vector<Expr>& row,
                         const std::vector<Node*>& stores) {
    for (Node* r : batch) {
      const std::string id = local(r), t = glsl_compute_type(r->compute);
      line(std::string(compensated(r) ? "precise " : "") + t + " acc" + id + " = " + reduction_init(r) + ";");
      if (compensated(r)) line("precise " + t + " cmp" + id + " = " + t + "(0); " + t + " raw" + id + " = " + t + "(0);");
      if (has_nan_flag(r)) line("bool nan" + id + " = false;");
    }
    for_row_elements(row, [&](const std::vector<Expr>& c) {
      accumulate_batch(batch, c);
      for (Node* r : stores) {
        current_root_ = r->id;
        store(r, c, emit(r, c));
      }
    });
    share_and_combine(batch);
  }

  void accumulate_batch(const std::vector<Node*>& batch, const std::vector<Expr>& c) {
    for (Node* r : batch) {
      current_root_ = r->id;
      const std::string id = local(r), t = glsl_compute_type(r->compute);
      const std::string v = convert(emit(r->inputs[0], c), value_type(r->inputs[0]), t);
      const std::string acc = "acc" + id;
      if (compensated(r)) {
        // `precise`: without it the compiler may fold (s - acc) - y to 0.
        line("{ const " + t + " x = " + v + "; raw" + id + " += x; precise " + t + " y = x - cmp" + id +
             "; precise " + t + " s = " + acc + " + y; cmp" + id + " = (s - " + acc + ") - y; " + acc + " = s; }");
      } else if (r->op == "sum") {
        line(acc + " += " + v + ";");
      } else if (r->op == "prod") {
        line(acc + " *= " + v + ";");
      } else if (r->op == "any") {
        line(acc + " = " + acc + " || " + v + ";");
      } else if (r->op == "all") {
        line(acc + " = " + acc + " && " + v + ";");
      } else {
        const std::string cmp = r->op == "max" ? " > " : " < ";
        const std::string flag = has_nan_flag(r) ? " nan" + id + " = nan" + id + " || isnan(x);" : "";
        line("{ const " + t + " x = " + v + ";" + flag + " " + acc + " = x" + cmp + acc + " ? x : " + acc + "; }");
      }
    }
  }

  // Each invocation's share into shared memory, then the tree; every
  // invocation reads the results (accumulators_). Short rows: the
  // invocation's share is the result.
  void share_and_combine(const std::vector<Node*>& batch) {
    const std::vector<Expr>& row = row_;
    for (Node* r : batch) {
      const std::string id = local(r), t = glsl_compute_type(r->compute), st = shared_type(r);
      const std::string acc = "acc" + id;
      if (compensated(r)) {
        line(acc + " = " + acc + " - cmp" + id + ";");
        line("if (isinf(raw" + id + ") || isnan(raw" + id + ")) " + acc + " = raw" + id + ";");
      }
      if (has_nan_flag(r)) line("if (nan" + id + ") " + acc + " = " + t + "(ON_NAN);");
      if (short_rows_) continue;
      shared_ += "shared " + st + " on_sh" + id + "[" + std::to_string(kGlslWorkgroupSize) + "];\n";
      line("on_sh" + id + "[on_li] = " + convert(acc, t, st) + ";");
    }
    if (!short_rows_) combine_shares(batch);
    for (Node* r : batch) {
      const std::string id = local(r), t = glsl_compute_type(r->compute);
      const std::string total = short_rows_ ? "acc" + id : convert("on_sh" + id + "[0]", shared_type(r), t);
      std::string value = convert(total, t, value_type(r));
      if (r->dtype == DType::Float16) value = "float(float16_t(" + total + "))";
      if (r->dtype == DType::BFloat16) value = "on_bf16_load(on_bf16_store(" + total + "))";
      const std::string var = fresh();
      line("const " + value_type(r) + " " + var + " = " + value + ";");
      accumulators_[r->id] = var;
    }
    if (!short_rows_) line("barrier();  // every invocation has read the results: shared memory is free again");
    for (Node* r : batch) {
      if (!r->materialize) continue;
      open_first_invocation_only();
      store(r, row, accumulators_[r->id]);
      close_first_invocation_only();
    }
  }

  // The tree over the workgroup's shares in shared memory: on_sh*[0] ends
  // with the row's result.
  void combine_shares(const std::vector<Node*>& batch) {
    line("barrier();");
    for (int half = kGlslWorkgroupSize / 2; half > 0; half /= 2) {
      std::string step = "if (on_lid < " + std::to_string(half) + "L) {";
      for (Node* r : batch) {
        const std::string sh = "on_sh" + local(r);
        std::string other = sh + "[on_li + " + std::to_string(half) + "u]";
        // A NaN partial of a max/min wins, as PyTorch propagates NaN.
        if (has_nan_flag(r))
          step += " if (isnan(" + other + ")) " + sh + "[on_li] = " + other + "; else if (!isnan(" + sh +
                  "[on_li])) " + combine(r, sh + "[on_li]", other);
        else
          step += " " + combine(r, sh + "[on_li]", other);
      }
      line(step + " }");
      line("barrier();");
    }
  }

  // Row results are stored once: by invocation 0 of a row's workgroup, or
  // by the short row's own invocation.
  void open_first_invocation_only() {
    line(short_rows_ ? "{" : "if (on_lid == 0L) {");
    ++indent_;
  }
  void close_first_invocation_only() {
    --indent_;
    line("}");
  }

  const KernelGroup& g_;
  std::vector<int64_t> reduced_;  // reductions: the reduced dims
  bool short_rows_ = false;       // reductions: an invocation per row
  std::vector<Expr> row_;         // reductions: the current row's coordinates
  std::string shared_;            // shared-memory declarations
  std::string name_;
  std::vector<std::string> symbols_;
  std::string float_symbol_type_;  // double, or float where the device lacks float64
  std::string body_, prologue_;
  int indent_ = 1;
  int counter_ = 0;
  std::map<const Node*, size_t> local_ids_;  // local()
  std::set<std::string> ref_types_;  // buffer element types the kernel touches
  std::map<int, std::string> host_values_;
  std::vector<std::map<std::string, std::string>> scopes_;
  std::map<int, std::string> accumulators_;
  std::string row_key_;
  int current_root_ = -1;
  std::set<int> current_roots_;
  std::map<const Node*, std::pair<Node*, Expr>> stored_inputs_;
  std::vector<Node*> reads_, outputs_;
};

}  // namespace

GeneratedKernel generate_glsl_kernel(const KernelGroup& group, const std::string& name,
                                     const std::vector<std::string>& symbols, bool fp64) {
  if (!fp64)
    if (const Node* n = float64_value(group))
      throw UnsupportedError("float64 values (" + (n->fx_name.empty() ? n->op : n->fx_name) + ")" +
                             " on a Vulkan device without float64 shaders (shaderFloat64), never computed in float32");
  return GlslKernelWriter(group, name, symbols, fp64).run();
}

}  // namespace openneuron::compiler
