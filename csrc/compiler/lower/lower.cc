#include "compiler/lower/lower.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "compiler/ir/errors.h"
#include "compiler/lower/aten_ops.h"

namespace openneuron::compiler {

namespace {

// What an FX node evaluates to, as far as lowering is concerned.
struct Value {
  Node* tensor = nullptr;
  std::optional<Expr> sym;
  // A host scalar (SymFloat, or a 0-dim CPU tensor made of one) that the
  // wrapper computes from the sizes and kernels receive as an argument.
  std::optional<Expr> float_sym;
  bool float_sym_is_int = false;
  std::vector<Value> items;  // tuples
  bool is_tuple = false;
  int opaque_input = -1;  // index of a graph input that is an opaque object
  bool host = false;      // an extern's result that is not a neuron tensor
};

struct TensorMeta {
  DType dtype;
  std::vector<Expr> shape, strides;
  Expr offset;
  bool host = false;  // a CPU scalar (see Node::host)
};

TensorMeta tensor_meta(const Json& m) {
  if (m.get("t").is_null() || m.at("t").as_string() != "tensor")
    throw UnsupportedError("output is not a tensor");
  TensorMeta t{dtype_from_name(m.at("dtype").as_string()), {}, {}, Expr(0)};
  for (auto& e : m.at("shape").items()) t.shape.push_back(Expr::from_json(e));
  for (auto& e : m.at("stride").items()) t.strides.push_back(Expr::from_json(e));
  t.offset = Expr::from_json(m.at("offset"));
  t.host = m.get("host").is_bool() && m.at("host").as_bool();
  return t;
}

class Lowerer {
 public:
  Lowerer(LoweredGraph& out, const std::set<std::string>& forced_externs)
      : out_(out), g_(out.graph), forced_externs_(forced_externs) {}

  void run(const Json& fx) {
    for (auto& in : fx.at("inputs").items()) add_input(in);
    for (auto& node : fx.at("nodes").items()) lower_node(node);
    for (auto& o : fx.at("outputs").items()) add_output(o);
  }

 private:
  // ---- inputs and outputs -------------------------------------------------
  void add_input(const Json& in) {
    const std::string& name = in.at("name").as_string();
    const Json& meta = in.at("meta");
    const std::string& t = meta.at("t").as_string();
    Value v;
    if (t == "tensor") {
      TensorMeta m = tensor_meta(meta);
      Node* n = g_.add(NodeKind::Input, "input");
      n->dtype = m.dtype;
      n->shape = m.shape;
      n->strides = m.strides;
      n->offset = m.offset;
      n->index = static_cast<int>(g_.inputs.size());
      n->host = m.host;
      n->fx_name = name;
      n->materialize = true;
      g_.inputs.push_back(n);
      v.tensor = n;
    } else if (t == "sym") {
      v.sym = Expr::from_json(meta.at("expr"));
      g_.inputs.push_back(nullptr);
    } else {
      v.opaque_input = static_cast<int>(g_.inputs.size());
      g_.inputs.push_back(nullptr);
    }
    values_[name] = v;
  }

  void add_output(const Json& o) {
    GraphOutput out;
    if (o.is_null()) {
      out.kind = GraphOutput::Kind::None;
    } else if (o.is_object() && o.has("ref")) {
      const Value& v = value(o.at("ref").as_string());
      if (v.tensor) {
        out.kind = GraphOutput::Kind::Tensor;
        out.node = v.tensor;
      } else if (v.sym) {
        out.kind = GraphOutput::Kind::SymInt;
        out.expr = *v.sym;
      } else if (v.host) {
        out.kind = GraphOutput::Kind::Host;
        out.fx_name = o.at("ref").as_string();
      } else if (v.float_sym) {  // the wrapper's variable of that name
        out.kind = GraphOutput::Kind::SymInt;
        out.expr = *v.float_sym;
      } else if (v.opaque_input >= 0) {
        out.kind = GraphOutput::Kind::Input;
        out.input_index = v.opaque_input;
      } else {
        throw CompileError("graph output " + o.dump() + " is neither a tensor, a SymInt nor a graph input");
      }
    } else if (o.is_int()) {
      out.kind = GraphOutput::Kind::Int;
      out.number = static_cast<double>(o.as_int());
    } else if (o.is_number()) {
      out.kind = GraphOutput::Kind::Float;
      out.number = o.as_double();
    } else {
      throw CompileError("unsupported graph output " + o.dump());
    }
    g_.outputs.push_back(out);
  }

  const Value& value(const std::string& name) {
    auto it = values_.find(name);
    if (it == values_.end()) throw CompileError("graph refers to unknown value " + name);
    return it->second;
  }

  // ---- argument access ------------------------------------------------------
  Node* tensor_arg(const Json& a) {
    if (!a.is_object() || !a.has("ref")) return nullptr;
    return value(a.at("ref").as_string()).tensor;
  }
  Expr int_arg(const Json& a) {
    if (a.is_int() || a.is_bool()) return Expr(a.as_int());
    if (a.is_object() && a.has("ref")) {
      const Value& v = value(a.at("ref").as_string());
      if (v.sym) return *v.sym;
    }
    if (a.is_object() && a.has("sym")) return Expr::from_json(a.at("sym"));
    throw UnsupportedError("expected an int argument, got " + a.dump());
  }
  int64_t const_int(const Json& a) {
    Expr e = int_arg(a);
    if (!e.is_const()) throw UnsupportedError("expected a constant int, got " + e.key());
    return e.value();
  }
  std::vector<int64_t> int_list(const Json& a) {
    std::vector<int64_t> out;
    if (a.is_array()) for (auto& x : a.items()) out.push_back(const_int(x));
    else out.push_back(const_int(a));
    return out;
  }
  const Json& arg(const Json& node, size_t i, const std::string& kw) {
    const Json& args = node.at("args");
    if (i < args.size()) return args[i];
    return node.at("kwargs").get(kw);
  }

  // ---- node lowering --------------------------------------------------------
  void lower_node(const Json& node) {
    const std::string& name = node.at("name").as_string();
    const std::string& target = node.at("target").as_string();
    Value v;
    const int first_new = static_cast<int>(g_.nodes().size());
    try {
      if (forced_externs_.count(name)) throw ExternByDesign("run as an extern (see ExternNeeded)");
      v = lower_op(node, target);
      // An op that is no view (a functional copy, a pad by zeros) returns a
      // tensor of its own, even where its value is an existing one's.
      if (v.tensor && v.tensor->id < first_new && target != "getitem" &&
          !is_view_op(target.substr(0, target.rfind('.'))))
        v.tensor = pointwise("identity", {v.tensor}, v.tensor->shape, v.tensor->dtype,
                             compute_dtype(v.tensor->dtype));
    } catch (const ExternByDesign&) {
      v = make_extern(node, target);
    } catch (const UnsupportedError& e) {
      if (is_generated_family(target)) out_.fallbacks.push_back({target, e.what()});
      v = make_extern(node, target);
    }
    if (v.tensor && v.tensor->kind != NodeKind::Input && v.tensor->kind != NodeKind::ExternOutput &&
        node.at("meta").get("t").is_string() && node.at("meta").at("t").as_string() == "tensor") {
      TensorMeta m = tensor_meta(node.at("meta"));
      if (m.shape == v.tensor->shape) v.tensor->meta_strides = m.strides;
    }
    if (v.tensor && node.get("op_result").is_bool() && node.at("op_result").as_bool())
      mark_rounded_result(v.tensor, first_new);
    values_[name] = v;
  }

  // The value this op computed (through the views it ends with), if it is a
  // 16-bit float: rounded to its dtype where computed (Node::rounds_to_dtype).
  static void mark_rounded_result(Node* n, int first_new) {
    while (n->kind == NodeKind::View && n->id >= first_new && !n->inputs.empty()) n = n->inputs[0];
    if (n->id >= first_new && n->is_compute() && (n->dtype == DType::Float16 || n->dtype == DType::BFloat16))
      n->rounds_to_dtype = true;
  }

  Value lower_op(const Json& node, const std::string& target) {
    const Json& meta = node.at("meta");
    if (meta.at("t").as_string() == "symfloat") {
      // Computed by the wrapper from the symbolic sizes, passed to kernels.
      Value v;
      v.float_sym = Expr::symbol(meta.at("name").as_string());
      v.float_sym_is_int = meta.get("int").is_bool() && meta.at("int").as_bool();
      return v;
    }
    if (meta.at("t").as_string() == "sym") {
      // SymInt arithmetic: its value is the expression in the meta.
      Value v;
      v.sym = Expr::from_json(meta.at("expr"));
      return v;
    }
    if (target == "getitem") {
      const Value& tuple = value(node.at("args")[0].at("ref").as_string());
      int64_t i = node.at("args")[1].as_int();
      if (!tuple.is_tuple || i < 0 || i >= static_cast<int64_t>(tuple.items.size()))
        throw CompileError("getitem on a non-tuple value");
      return tuple.items[i];
    }
    if (target == "aten.copy_.default") return tensor(lower_store(node));
    if (meta.at("t").as_string() == "tensor" && tensor_meta(meta).host) return tensor(lower_host_value(node, target));
    if (target == "aten.round.decimals") return tensor(lower_round_decimals(node));
    if (const PointwiseLowering* pw = find_pointwise(target)) return tensor(lower_pointwise(node, target, *pw));
    std::string base = target.substr(0, target.rfind('.'));
    if (base == "aten.clamp") return tensor(lower_clamp(node));
    if (base == "aten._to_copy" || base == "prims.convert_element_type" || base == "aten.clone" ||
        base == "aten.lift_fresh_copy")
      return tensor(lower_copy(node));
    if (base == "aten.full" || base == "aten.full_like" || base == "aten.scalar_tensor")
      return tensor(lower_full(node));
    if (target == "aten.copy.default") {  // functional copy: src cast and broadcast to self's meta
      TensorMeta m = tensor_meta(node.at("meta"));
      Node* src = tensor_arg(node.at("args")[1]);
      if (!src || !tensor_arg(node.at("args")[0])) throw UnsupportedError("copy from or to a host tensor");
      if (is_complex(m.dtype) || is_complex(src->dtype)) throw UnsupportedError("complex dtype");
      return tensor(cast(broadcast(src, m.shape), m.dtype));
    }
    if (base == "aten.sum" || base == "aten.amax" || base == "aten.amin" || base == "aten.prod" ||
        base == "aten.mean" || base == "aten.any" || base == "aten.all")
      return tensor(lower_reduction(node, base.substr(5)));
    if (base == "aten.var") return tensor(lower_var(node, false).first);
    if (base == "aten.var_mean") {
      auto [var, mean] = lower_var(node, true);
      Value v;
      v.is_tuple = true;
      v.items = {tensor(var), tensor(mean)};
      return v;
    }
    if (target == "aten.native_layer_norm.default") return lower_layer_norm(node);
    if (target == "aten.native_layer_norm_backward.default") return lower_layer_norm_backward(node);
    if (target == "aten.select_backward.default") return tensor(lower_select_backward(node));
    if (base == "aten.arange") return tensor(lower_arange(node, target));
    if (base == "aten.constant_pad_nd") return tensor(lower_pad(node));
    if (base == "aten.cat") return tensor(lower_cat(node));
    if (target == "aten.slice_scatter.default") return tensor(lower_slice_scatter(node));
    if (base == "aten.split_with_sizes" || base == "aten.split" || base == "aten.unbind")
      return lower_split(node, base);
    if (Node* view = lower_view(node, base)) return tensor(view);
    throw UnsupportedError("no lowering");
  }

  // Pointwise work on CPU scalars only (an optimizer's bias corrections from
  // its step counts): host values, computed by each kernel that reads them,
  // once per launch. Anything else on CPU scalars runs on the host, as does
  // a host value that turns out to be needed as a tensor (ExternNeeded).
  Node* lower_host_value(const Json& node, const std::string& target) {
    const PointwiseLowering* pw = find_pointwise(target);
    if (!pw) throw ExternByDesign("a host (CPU) value");
    const size_t first_new = g_.nodes().size();
    Node* n = lower_pointwise(node, target, *pw);
    const std::string& name = node.at("name").as_string();
    for (size_t i = first_new; i < g_.nodes().size(); ++i) {
      Node* made = g_.nodes()[i].get();
      for (Node* in : made->inputs)
        if (!in->host && in->kind != NodeKind::Constant && in->id < static_cast<int>(first_new))
          throw ExternByDesign("a host (CPU) value of device operands");
      made->host = true;
      made->fx_name = name;
    }
    return n;
  }

  static Value tensor(Node* n) {
    Value v;
    v.tensor = n;
    return v;
  }

  Node* new_node(NodeKind kind, const std::string& op, const TensorMeta& m) {
    Node* n = g_.add(kind, op);
    n->dtype = m.dtype;
    n->shape = m.shape;
    return n;
  }

  // A pointwise node over `inputs` of the given shape and dtypes.
  Node* pointwise(const std::string& op, std::vector<Node*> inputs, const std::vector<Expr>& shape, DType dtype,
                  DType compute) {
    Node* n = g_.add(NodeKind::Pointwise, op);
    n->inputs = std::move(inputs);
    n->shape = shape;
    n->dtype = dtype;
    n->compute = compute;
    return n;
  }

  Node* constant(double value, bool is_int, DType dtype, const std::vector<Expr>& shape) {
    Node* n = g_.add(NodeKind::Constant, "constant");
    n->scalar = value;
    n->scalar_is_int = is_int;
    n->dtype = dtype;
    n->compute = compute_dtype(dtype);
    n->shape = shape;
    return n;
  }

  // A tensor broadcast to `shape`, through an explicit expand view.
  Node* broadcast(Node* in, const std::vector<Expr>& shape) {
    if (in->shape == shape) return in;
    if (in->shape.size() > shape.size()) throw UnsupportedError("operand has more dims than result");
    size_t lead = shape.size() - in->shape.size();
    for (size_t i = 0; i < in->shape.size(); ++i) {
      const Expr& s = in->shape[i];
      if (s != shape[lead + i] && !s.equals(1))
        throw UnsupportedError("cannot prove broadcast of " + join_keys(in->shape) + " to " + join_keys(shape));
    }
    Node* v = g_.add(NodeKind::View, "expand");
    v->inputs = {in};
    v->dtype = in->dtype;
    v->shape = shape;
    return v;
  }

  // Casts a node's value to `dtype` (identity when equal).
  Node* cast(Node* in, DType dtype) {
    if (in->dtype == dtype) return in;
    Node* n = g_.add(NodeKind::Pointwise, "identity");
    n->inputs = {in};
    n->dtype = dtype;
    n->compute = compute_dtype(dtype);
    n->shape = in->shape;
    return n;
  }

  // Operands of a pointwise op: tensors, or scalars (weakly typed).
  struct Operand {
    Node* node = nullptr;
    double scalar = 0;
    bool scalar_is_int = false;
    bool scalar_is_bool = false;
    std::optional<Expr> sym;  // a symbolic int scalar (SymInt): the kernel evaluates it
  };

  // A scalar operand as a constant node (symbolic ones evaluated in the kernel).
  Node* scalar_constant(const Operand& o, DType dtype, const std::vector<Expr>& shape) {
    Node* c = constant(o.scalar, o.scalar_is_int, dtype, shape);
    if (o.sym) c->view_args = {*o.sym};
    return c;
  }
  Operand operand(const Json& a) {
    Operand o;
    if ((o.node = tensor_arg(a))) return o;
    if (a.is_bool()) { o.scalar = a.as_bool(); o.scalar_is_int = true; o.scalar_is_bool = true; return o; }
    if (a.is_int()) { o.scalar = static_cast<double>(a.as_int()); o.scalar_is_int = true; return o; }
    if (a.is_number()) { o.scalar = a.as_double(); return o; }
    if (a.is_object() && a.has("ref")) {
      const Value& v = value(a.at("ref").as_string());
      if (v.sym && v.sym->is_const()) { o.scalar = static_cast<double>(v.sym->value()); o.scalar_is_int = true; return o; }
      if (v.sym) { o.sym = *v.sym; o.scalar_is_int = true; return o; }
      if (v.float_sym) { o.sym = *v.float_sym; o.scalar_is_int = v.float_sym_is_int; return o; }
    }
    throw UnsupportedError("unsupported operand " + a.dump());
  }

  // The dtype a comparison or logical op computes in: PyTorch's promotion,
  // where dimensioned tensors outrank 0-dim tensors, which outrank Python
  // scalars, unless the lower tier is of a higher category (int < float).
  DType promoted(const std::vector<Operand>& ops) {
    auto category = [](DType d) { return d == DType::Bool ? 0 : is_integral(d) ? 1 : is_floating(d) ? 2 : 3; };
    std::optional<DType> dimensioned, zero_dim;
    for (auto& o : ops) {
      if (!o.node) continue;
      auto& tier = o.node->rank() > 0 ? dimensioned : zero_dim;
      tier = tier ? promote(*tier, o.node->dtype) : o.node->dtype;
    }
    if (!dimensioned && !zero_dim) throw UnsupportedError("no tensor operand");
    DType t = dimensioned ? *dimensioned : *zero_dim;
    if (dimensioned && zero_dim && category(*zero_dim) > category(t)) t = *zero_dim;
    for (auto& o : ops) {
      if (o.node) continue;
      if (!o.scalar_is_int && category(t) < 2) t = DType::Float32;
      else if (o.scalar_is_int && !o.scalar_is_bool && t == DType::Bool) t = DType::Int64;
    }
    return t;
  }

  Node* lower_pointwise(const Json& node, const std::string& target, const PointwiseLowering& pw) {
    TensorMeta m = tensor_meta(node.at("meta"));
    if (is_complex(m.dtype)) throw UnsupportedError("complex dtype");
    const Json& args = node.at("args");
    std::vector<Operand> ops;
    for (int i = 0; i < pw.arity; ++i) {
      if (static_cast<size_t>(i) >= args.size()) throw UnsupportedError("missing operand");
      ops.push_back(operand(args[i]));
    }
    for (auto& o : ops)
      if (o.node && is_complex(o.node->dtype)) throw UnsupportedError("complex operand");
    std::string op = pw.ir_op;
    // PyTorch has no bitwise ops on floats: its kernel raises, so it runs.
    if (op.rfind("bitwise_", 0) == 0)
      for (auto& o : ops)
        if ((o.node && is_floating(o.node->dtype)) || (!o.node && !o.scalar_is_int))
          throw UnsupportedError("bitwise op on a floating operand");
    const Json& kwargs = node.at("kwargs");
    if ((op == "add" || op == "sub") && (kwargs.has("alpha") || args.size() > 2)) {
      const Json& alpha = args.size() > 2 ? args[2] : kwargs.at("alpha");
      Operand a = operand(alpha);
      if (a.node || a.sym) throw UnsupportedError("tensor or symbolic alpha");
      if (ops[1].node) {
        DType ct = compute_dtype(m.dtype);
        Node* scaled = g_.add(NodeKind::Pointwise, "mul");
        scaled->inputs = {ops[1].node, constant(a.scalar, a.scalar_is_int, ct, ops[1].node->shape)};
        scaled->dtype = ct == DType::Float32 || ct == DType::Float64 ? ct : m.dtype;
        scaled->compute = ct;
        scaled->shape = ops[1].node->shape;
        ops[1].node = scaled;
      } else {
        ops[1].scalar *= a.scalar;
      }
    }
    // Shifts depend on the result's width (a count past it gives 0, or the
    // sign for a right shift, as the CPU's kernels): "bitwise_shl32",
    // "bitwise_shr31" (the largest count a signed int32 shifts by).
    if (op == "bitwise_shl" || op == "bitwise_shr") {
      if (!is_integral(m.dtype)) throw UnsupportedError("shift of a non-integer result");
      const int bits = m.dtype == DType::Int64 ? 64 : m.dtype == DType::Int32 ? 32 : m.dtype == DType::Int16 ? 16 : 8;
      op += std::to_string(op == "bitwise_shl" || m.dtype == DType::UInt8 ? bits : bits - 1);
    }
    if (op == "div") {
      const Json& mode = kwargs.get("rounding_mode");
      if (mode.is_string()) op = mode.as_string() == "trunc" ? "div_trunc" : "div_floor";
    }
    DType common = pw.is_comparison ? promoted(ops) : m.dtype;
    DType ct = op == "where" ? compute_dtype(m.dtype) : compute_dtype(common);
    // A comparison sees its operands in the common dtype: rounded to it
    // first when that is a 16-bit float, as PyTorch's kernels do.
    if (pw.is_comparison && compute_dtype(common) != common && is_floating(common))
      for (auto& o : ops)
        if (o.node && o.node->dtype != common) o.node = cast(o.node, common);
    if (op == "pow" && ops[0].node && !ops[1].node && !ops[1].sym && is_floating(ct))
      if (Node* p = pow_by_constant(broadcast(ops[0].node, m.shape), ops[1].scalar, m, ct)) return p;
    Node* n = new_node(NodeKind::Pointwise, op, m);
    n->compute = ct;
    for (size_t i = 0; i < ops.size(); ++i) {
      DType operand_dtype = (op == "where" && i == 0) ? DType::Bool : ct;
      if (ops[i].node) n->inputs.push_back(broadcast(ops[i].node, m.shape));
      else n->inputs.push_back(scalar_constant(ops[i], operand_dtype, m.shape));
    }
    return n;
  }

  // A floating pow with one of the exponents ATen's kernel special-cases,
  // computed the way it does (x*x, x*x*x, 1/(x*x), sqrt, rsqrt, 1/x); this
  // also keeps a pow call out of GELU's tanh form (x ** 3). Else nullptr.
  Node* pow_by_constant(Node* x, double e, const TensorMeta& m, DType ct) {
    auto op = [&](const std::string& name, std::vector<Node*> inputs) {
      return pointwise(name, std::move(inputs), m.shape, m.dtype, ct);
    };
    if (e == 2.0) return op("mul", {x, x});
    if (e == 3.0) return op("mul", {op("mul", {x, x}), x});
    if (e == -2.0) return op("reciprocal", {op("mul", {x, x})});
    if (e == 0.5) return op("sqrt", {x});
    if (e == -0.5) return op("rsqrt", {x});
    if (e == -1.0) return op("reciprocal", {x});
    return nullptr;
  }

  // round(x, decimals) as ATen's kernel: nearbyint(x * 10^d) / 10^d, or for
  // d < 0 nearbyint(x / 10^-d) * 10^-d, in the op-math type.
  Node* lower_round_decimals(const Json& node) {
    TensorMeta m = tensor_meta(node.at("meta"));
    Node* x = tensor_arg(node.at("args")[0]);
    if (!x || !is_floating(m.dtype)) throw UnsupportedError("round with decimals of a non-float");
    const Json& d = arg(node, 1, "decimals");
    const int64_t decimals = d.is_null() ? 0 : const_int(d);
    const DType ct = compute_dtype(m.dtype);
    auto op = [&](const std::string& name, std::vector<Node*> inputs) {
      return pointwise(name, std::move(inputs), m.shape, m.dtype, ct);
    };
    const double scale = std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals));
    Node* c = constant(scale, false, ct, m.shape);
    if (decimals < 0) return op("mul", {op("round", {op("div", {x, c})}), c});
    return op("div", {op("round", {op("mul", {x, c})}), c});
  }

  Node* lower_clamp(const Json& node) {
    TensorMeta m = tensor_meta(node.at("meta"));
    if (is_complex(m.dtype)) throw UnsupportedError("complex dtype");
    Node* x = tensor_arg(node.at("args")[0]);
    if (!x) throw UnsupportedError("clamp of a scalar");
    DType ct = compute_dtype(m.dtype);
    Node* cur = x;
    for (auto [idx, kw, op] : {std::tuple{1, "min", "maximum"}, std::tuple{2, "max", "minimum"}}) {
      const Json& bound = arg(node, idx, kw);
      if (bound.is_null()) continue;
      Operand b = operand(bound);
      Node* n = new_node(NodeKind::Pointwise, op, m);
      n->compute = ct;
      n->inputs = {broadcast(cur, m.shape),
                   b.node ? broadcast(b.node, m.shape) : scalar_constant(b, ct, m.shape)};
      cur = n;
    }
    return cur == x ? cast(x, m.dtype) : cur;
  }

  Node* lower_copy(const Json& node) {
    TensorMeta m = tensor_meta(node.at("meta"));
    const Json& source = node.at("args")[0];
    Node* x = tensor_arg(source);
    // A referenced tensor that is not on the device lives on the host (a CPU
    // scalar such as a cache position): copying it is a transfer.
    if (!x && source.is_object() && source.has("ref")) throw ExternByDesign("transfer from the host");
    if (!x) throw UnsupportedError("copy of a non-tensor");
    if (is_complex(m.dtype) || is_complex(x->dtype)) throw UnsupportedError("complex dtype");
    const Json& kwargs = node.at("kwargs");
    const Json& layout = kwargs.get("layout");
    if (!layout.is_null() && layout.dump() != "{\"enum\":\"torch.strided\"}")
      throw UnsupportedError("copy to layout " + layout.dump());
    const Json& device = kwargs.get("device");
    if (!device.is_null() && device.get("device").is_string() &&
        device.at("device").as_string().rfind("neuron", 0) != 0)
      throw UnsupportedError("copy to another device");
    Node* n = new_node(NodeKind::Pointwise, "identity", m);
    n->inputs = {x};
    n->compute = compute_dtype(m.dtype);
    return n;
  }

  // `input.copy_(value)` on a graph input (a functionalized in-place update):
  // a store of the value, cast and broadcast, into the input's memory. The
  // kernel that computes the value writes it there, no extra pass. A CPU
  // scalar input takes a host value (an optimizer's step count + 1): a host
  // store, written after every kernel (see the scheduler).
  Node* lower_store(const Json& node) {
    const std::string& name = node.at("name").as_string();
    Node* dst = tensor_arg(node.at("args")[0]);
    Node* src = tensor_arg(node.at("args")[1]);
    if (!dst || !src || dst->kind != NodeKind::Input || (dst->host && !src->host))
      throw ExternByDesign("copy into a tensor that is not a device graph input");
    if (is_complex(dst->dtype) || is_complex(src->dtype)) throw UnsupportedError("complex dtype");
    Node* n = g_.add(NodeKind::Pointwise, "identity");
    n->inputs = {broadcast(src, dst->shape)};
    n->dtype = dst->dtype;
    n->compute = compute_dtype(dst->dtype);
    n->shape = dst->shape;
    n->store_into = dst;
    n->host = dst->host;
    n->fx_name = name;
    return n;
  }

  Node* lower_full(const Json& node) {
    TensorMeta m = tensor_meta(node.at("meta"));
    const Json& v = node.at("target").as_string().rfind("aten.scalar_tensor", 0) == 0 ? node.at("args")[0]
                                                                                      : node.at("args")[1];
    Operand o = operand(v);
    if (o.node) throw UnsupportedError("tensor fill value");
    if (is_complex(m.dtype)) throw UnsupportedError("complex dtype");
    return scalar_constant(o, m.dtype, m.shape);
  }

  std::vector<int64_t> reduce_dims(const Json& dims_arg, int rank) {
    std::vector<int64_t> dims;
    if (dims_arg.is_null() || (dims_arg.is_array() && dims_arg.size() == 0)) {
      for (int i = 0; i < rank; ++i) dims.push_back(i);
      return dims;
    }
    for (int64_t d : int_list(dims_arg)) {
      if (rank == 0 && (d == 0 || d == -1)) continue;
      dims.push_back(d < 0 ? d + rank : d);
    }
    std::sort(dims.begin(), dims.end());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
    return dims;
  }

  // A Reduce node with keepdim, then a view dropping the reduced dims when
  // the op does not keep them.
  Node* reduce(const std::string& kind, Node* x, const std::vector<int64_t>& dims, DType out_dtype,
               DType compute, bool keepdim) {
    std::vector<Expr> kept = x->shape;
    for (int64_t d : dims) kept[d] = Expr(1);
    Node* r = g_.add(NodeKind::Reduce, kind);
    r->inputs = {x};
    r->dims = dims;
    r->keepdim = true;
    r->dtype = out_dtype;
    r->compute = compute;
    r->shape = kept;
    return keepdim ? r : squeeze_reduced(r, x, dims);
  }

  Node* view(Node* in, const std::string& op, const std::vector<Expr>& shape) {
    Node* v = g_.add(NodeKind::View, op);
    v->inputs = {in};
    v->dtype = in->dtype;
    v->shape = shape;
    return v;
  }

  Expr reduced_count(Node* x, const std::vector<int64_t>& dims) {
    Expr n(1);
    for (int64_t d : dims) n = n * x->shape[d];
    return n;
  }

  // A constant of `shape` whose value is the symbolic `count`, evaluated by
  // the kernel.
  Node* count_constant(const Expr& count, DType dtype, const std::vector<Expr>& shape) {
    Node* c = constant(0, true, dtype, shape);
    c->view_args = {count};
    return c;
  }

  // `value / count` for a symbolic count, in dtype `dt`.
  Node* divide_by_count(Node* value, const Expr& count, DType dt) {
    Node* c = count_constant(count, compute_dtype(dt), value->shape);
    Node* n = g_.add(NodeKind::Pointwise, "div");
    n->inputs = {value, c};
    n->dtype = dt;
    n->compute = compute_dtype(dt);
    n->shape = value->shape;
    return n;
  }

  Node* lower_reduction(const Json& node, const std::string& kind) {
    TensorMeta m = tensor_meta(node.at("meta"));
    Node* x = tensor_arg(node.at("args")[0]);
    if (!x) throw UnsupportedError("reduction of a non-tensor");
    if (is_complex(x->dtype) || is_complex(m.dtype)) throw UnsupportedError("complex dtype");
    const Json& args = node.at("args");
    bool all_dims = args.size() < 2 && !node.at("kwargs").has("dim");
    const Json& dims_arg = all_dims ? Json() : arg(node, 1, "dim");
    if (kind == "prod" && !all_dims && !dims_arg.is_null() && dims_arg.is_array())
      throw UnsupportedError("prod over a dim list");
    std::vector<int64_t> dims = reduce_dims(dims_arg, x->rank());
    bool keepdim = false;
    const Json& kd = all_dims ? Json() : arg(node, 2, "keepdim");
    if (kd.is_bool()) keepdim = kd.as_bool();
    if (x->rank() == 0) dims.clear();
    if (kind == "mean") {
      if (!is_floating(m.dtype)) throw UnsupportedError("integer mean");
      Node* s = reduce("sum", x, dims, m.dtype, compute_dtype(m.dtype), true);
      Node* mean = divide_by_count(s, reduced_count(x, dims), m.dtype);
      return keepdim ? mean : squeeze_reduced(mean, x, dims);
    }
    std::string ir_kind = kind == "amax" ? "max" : kind == "amin" ? "min" : kind;
    DType compute = (ir_kind == "max" || ir_kind == "min") ? compute_dtype(x->dtype)
                    : (ir_kind == "any" || ir_kind == "all") ? DType::Bool
                                                             : compute_dtype(m.dtype);
    return reduce(ir_kind, x, dims, m.dtype, compute, keepdim);
  }

  Node* squeeze_reduced(Node* r, Node* x, const std::vector<int64_t>& dims) {
    std::vector<Expr> squeezed;
    for (int i = 0; i < x->rank(); ++i)
      if (!std::binary_search(dims.begin(), dims.end(), i)) squeezed.push_back(x->shape[i]);
    return view(r, "reshape", squeezed);
  }

  // The mean over `dims` (kept) of `xs`, already in its computation dtype,
  // and the sum of squared deviations from it: two passes over the row.
  std::pair<Node*, Node*> mean_and_squared_deviations(Node* xs, const std::vector<int64_t>& dims) {
    DType ct = xs->dtype;
    Node* sum = reduce("sum", xs, dims, ct, ct, true);
    Node* mean = divide_by_count(sum, reduced_count(xs, dims), ct);
    Node* dev = binary("sub", xs, mean);
    return {mean, reduce("sum", binary("mul", dev, dev), dims, ct, ct, true)};
  }

  // `op` of `a` and `b` broadcast to a's shape, in a's dtype.
  Node* binary(const std::string& op, Node* a, Node* b) {
    return pointwise(op, {a, broadcast(b, a->shape)}, a->shape, a->dtype, a->dtype);
  }

  // var (and mean) in two passes over the row: mean, then squared deviations.
  std::pair<Node*, Node*> lower_var(const Json& node, bool with_mean) {
    const Json& meta = node.at("meta");
    TensorMeta m = tensor_meta(with_mean ? meta.at("items")[0] : meta);
    Node* x = tensor_arg(node.at("args")[0]);
    if (!x || !is_floating(x->dtype)) throw UnsupportedError("var of a non-float tensor");
    std::vector<int64_t> dims = reduce_dims(arg(node, 1, "dim"), x->rank());
    double correction = 1;
    const Json& c = node.at("kwargs").get("correction");
    if (c.is_number()) correction = c.as_double();
    else if (node.at("args").size() > 2 && node.at("args")[2].is_number()) correction = node.at("args")[2].as_double();
    if (correction != static_cast<int64_t>(correction)) throw UnsupportedError("fractional correction");
    const Json& kd = node.at("kwargs").get("keepdim");
    bool keepdim = kd.is_bool() && kd.as_bool();
    DType ct = compute_dtype(m.dtype);
    auto [mean, ss] = mean_and_squared_deviations(cast(x, ct), dims);
    Expr denom = Expr::max(reduced_count(x, dims) - Expr(static_cast<int64_t>(correction)), Expr(0));
    Node* var = cast(divide_by_count(ss, denom, ct), m.dtype);
    Node* mean_out = cast(mean, m.dtype);
    if (!keepdim) {
      var = squeeze_reduced(var, x, dims);
      mean_out = squeeze_reduced(mean_out, x, dims);
    }
    return {var, mean_out};
  }

  // native_layer_norm and its backward, lowered here rather than decomposed
  // in Python: their decompositions cost AOTAutograd 3-6 ms a call to trace
  // (0.65 s of a 32-layer encoder's compile). The arithmetic is PyTorch's
  // reference (torch/_refs native_layer_norm, torch/_decomp
  // native_layer_norm_backward), in the input's computation dtype.
  std::vector<int64_t> normalized_dims(const Json& shape_arg, Node* x) {
    if (!shape_arg.is_array()) throw UnsupportedError("normalized_shape is not a list");
    int k = static_cast<int>(shape_arg.items().size());
    if (k < 1 || k > x->rank()) throw UnsupportedError("normalized_shape of another rank");
    std::vector<int64_t> dims;
    for (int d = x->rank() - k; d < x->rank(); ++d) dims.push_back(d);
    return dims;
  }

  // An output `n` of a multi-output op as the dtype its metadata says.
  Value item_as(Node* n, const Json& meta) {
    TensorMeta m = tensor_meta(meta);
    if (m.shape != n->shape) throw UnsupportedError("result shape differs from its metadata");
    return tensor(cast(n, m.dtype));
  }

  Value lower_layer_norm(const Json& node) {
    const Json& items = node.at("meta").at("items");
    Node* x = tensor_arg(node.at("args")[0]);
    if (!x || !is_floating(x->dtype)) throw UnsupportedError("layer_norm of a non-float tensor");
    std::vector<int64_t> dims = normalized_dims(node.at("args")[1], x);
    Node* weight = tensor_arg(arg(node, 2, "weight"));
    Node* bias = tensor_arg(arg(node, 3, "bias"));
    const Json& eps = arg(node, 4, "eps");
    if (!eps.is_number()) throw UnsupportedError("eps is not a number");
    DType ct = compute_dtype(x->dtype);
    Node* xs = cast(x, ct);
    auto [mean, ss] = mean_and_squared_deviations(xs, dims);
    Node* var = divide_by_count(ss, reduced_count(x, dims), ct);
    Node* rstd = pointwise("rsqrt", {binary("add", var, constant(eps.as_double(), false, ct, var->shape))},
                           var->shape, ct, ct);
    Node* out = binary("mul", binary("sub", xs, mean), rstd);
    if (weight) out = binary("mul", out, cast(weight, ct));
    if (bias) out = binary("add", out, cast(bias, ct));
    Value v;
    v.is_tuple = true;
    v.items = {item_as(out, items[0]), item_as(mean, items[1]), item_as(rstd, items[2])};
    return v;
  }

  Value lower_layer_norm_backward(const Json& node) {
    const Json& args = node.at("args");
    const Json& items = node.at("meta").at("items");
    Node* grad = tensor_arg(args[0]);
    Node* x = tensor_arg(args[1]);
    Node* mean = tensor_arg(args[3]);
    Node* rstd = tensor_arg(args[4]);
    Node* weight = tensor_arg(args[5]);
    Node* bias = tensor_arg(args[6]);
    const Json& mask = args[7];
    if (!grad || !x || !mean || !rstd || !is_floating(x->dtype)) throw UnsupportedError("layer_norm_backward operands");
    if (mean->rank() != x->rank() || rstd->rank() != x->rank()) throw UnsupportedError("mean or rstd of another rank");
    if (!mask.is_array() || mask.items().size() != 3) throw UnsupportedError("output_mask is not three bools");
    std::vector<int64_t> inner = normalized_dims(args[2], x), outer;
    for (int64_t d = 0; d < inner.front(); ++d) outer.push_back(d);
    DType ct = compute_dtype(x->dtype);
    Node* gs = cast(grad, ct);
    Node* x_hat = binary("mul", binary("sub", cast(x, ct), cast(mean, ct)), cast(rstd, ct));
    Node* grad_x_hat = weight ? binary("mul", gs, cast(weight, ct)) : gs;
    Expr n = reduced_count(x, inner);
    Node* a = binary("mul", grad_x_hat, count_constant(n, ct, x->shape));
    Node* b = reduce("sum", grad_x_hat, inner, ct, ct, true);
    Node* c2 = reduce("sum", binary("mul", grad_x_hat, x_hat), inner, ct, ct, true);
    Node* within = binary("sub", binary("sub", a, b), binary("mul", x_hat, c2));
    Value v;
    v.is_tuple = true;
    v.items.resize(3);
    if (mask.items()[0].as_bool())
      v.items[0] = item_as(binary("mul", broadcast(divide_by_count(cast(rstd, ct), n, ct), x->shape), within), items[0]);
    if (mask.items()[1].as_bool() && weight) {
      Node* gx = binary("mul", gs, x_hat);
      v.items[1] = item_as(outer.empty() ? gx : reduce("sum", gx, outer, ct, ct, false), items[1]);
    }
    if (mask.items()[2].as_bool() && bias) {
      Node* sum = outer.empty() ? pointwise("identity", {gs}, gs->shape, ct, ct) : reduce("sum", gs, outer, ct, ct, false);
      v.items[2] = item_as(sum, items[2]);
    }
    return v;
  }

  static bool is_view_op(const std::string& base) {
    static const std::set<std::string> views = {"aten.view", "aten._unsafe_view", "aten.reshape",
                                                "aten.unsqueeze", "aten.squeeze", "aten.alias",
                                                "aten.expand", "aten.permute", "aten.t",
                                                "aten.transpose", "aten.slice", "aten.select",
                                                "aten.as_strided"};
    return views.count(base) > 0;
  }

  Node* lower_view(const Json& node, const std::string& base) {
    if (!is_view_op(base)) return nullptr;
    TensorMeta m = tensor_meta(node.at("meta"));
    Node* x = tensor_arg(node.at("args")[0]);
    if (!x) throw UnsupportedError("view of a non-tensor");
    if (is_complex(x->dtype)) throw UnsupportedError("complex dtype");
    int rank = x->rank();
    auto norm = [&](int64_t d) { return d < 0 ? d + rank : d; };
    if (base == "aten.expand") return broadcast(x, m.shape);
    if (base == "aten.permute" || base == "aten.t" || base == "aten.transpose") {
      std::vector<int64_t> perm;
      for (int i = 0; i < rank; ++i) perm.push_back(i);
      if (base == "aten.permute") perm = int_list(node.at("args")[1]);
      for (auto& p : perm) p = norm(p);
      if (base == "aten.transpose" && rank > 0) {  // (a 0-dim tensor's transpose(0, 0) is itself)
        const int64_t a = norm(const_int(node.at("args")[1])), b = norm(const_int(node.at("args")[2]));
        if (a < 0 || a >= rank || b < 0 || b >= rank) throw UnsupportedError("transpose dim out of range");
        std::swap(perm[a], perm[b]);
      } else if (base == "aten.t" && rank == 2) {
        std::swap(perm[0], perm[1]);
      }
      std::vector<bool> seen(rank, false);
      for (int64_t p : perm) {
        if (p < 0 || p >= rank || seen[p]) throw UnsupportedError("permutation is not one of the dims");
        seen[p] = true;
      }
      if (static_cast<int>(perm.size()) != rank) throw UnsupportedError("permutation of another rank");
      Node* v = view(x, "permute", m.shape);
      v->dims = perm;
      return v;
    }
    if (base == "aten.slice") {
      int64_t dim = rank ? norm(const_int(arg(node, 1, "dim").is_null() ? Json::integer(0) : arg(node, 1, "dim"))) : 0;
      const Json& start_arg = arg(node, 2, "start");
      const Expr start = slice_start(start_arg.is_null() ? Expr(0) : int_arg(start_arg), x->shape[dim]);
      const Json& step_arg = arg(node, 4, "step");
      Expr step = step_arg.is_null() ? Expr(1) : int_arg(step_arg);
      Node* v = view(x, "slice", m.shape);
      v->view_args = {Expr(dim), start, step};
      return v;
    }
    if (base == "aten.select") {
      int64_t dim = norm(const_int(node.at("args")[1]));
      Expr index = int_arg(node.at("args")[2]);
      if (index.is_const() && index.value() < 0) index = x->shape[dim] + index;
      Node* v = view(x, "select", m.shape);
      v->view_args = {Expr(dim), index};
      return v;
    }
    if (base == "aten.as_strided") {
      if (x->kind != NodeKind::Input) throw UnsupportedError("as_strided of a computed value");
      Node* v = view(x, "as_strided", m.shape);
      v->view_args = m.strides;
      v->view_args.push_back(m.offset);
      return v;
    }
    return view(x, "reshape", m.shape);
  }

  // arange as start + step * index in int64, then cast. Exact, so it
  // matches ATen for integral outputs, and for floating ones whose values are
  // all integers the dtype represents exactly; ATen's float arange rounds
  // per vector lane (results depend on its SIMD width), so other floating
  // aranges stay eager. start and step may be symbolic ints.
  Node* lower_arange(const Json& node, const std::string& target) {
    TensorMeta m = tensor_meta(node.at("meta"));
    if (m.shape.size() != 1) throw UnsupportedError("arange of rank != 1");
    if (m.dtype == DType::Bool || is_complex(m.dtype)) throw UnsupportedError("arange dtype");
    const Json& args = node.at("args");
    Operand start, step;
    start.scalar_is_int = step.scalar_is_int = true;
    step.scalar = 1;
    if (target == "aten.arange.start" || target == "aten.arange.start_step") {
      start = operand(args[0]);
      if (target == "aten.arange.start_step" && args.size() > 2) step = operand(args[2]);
    } else if (target != "aten.arange.default") {
      throw UnsupportedError("arange overload");
    }
    if (start.node || step.node) throw UnsupportedError("tensor arange bounds");
    if (!start.scalar_is_int || !step.scalar_is_int) throw UnsupportedError("floating arange bounds");
    if (is_floating(m.dtype)) {
      const double exact = m.dtype == DType::Float64 ? 9007199254740992.0
                           : m.dtype == DType::Float32 ? 16777216.0
                           : m.dtype == DType::Float16 ? 2048.0 : 256.0;
      if (start.sym || step.sym || !m.shape[0].is_const() ||
          std::max(std::fabs(start.scalar), std::fabs(start.scalar + step.scalar * (m.shape[0].value() - 1))) > exact)
        throw UnsupportedError("floating arange with values the dtype does not hold exactly");
    }
    auto int64 = [&](const std::string& op, std::vector<Node*> inputs) {
      return pointwise(op, std::move(inputs), m.shape, DType::Int64, DType::Int64);
    };
    Node* index = int64("iota", {});
    Node* value = int64("add", {scalar_constant(start, DType::Int64, m.shape),
                                int64("mul", {scalar_constant(step, DType::Int64, m.shape), index})});
    return cast(value, m.dtype);
  }

  // constant_pad_nd: negative pads (a pad's backward) crop, as slices; the
  // others make a "pad" view (view_args: each dim's leading pad; scalar:
  // the fill), computed where it is read.
  Node* lower_pad(const Json& node) {
    TensorMeta m = tensor_meta(node.at("meta"));
    Node* x = tensor_arg(node.at("args")[0]);
    if (!x) throw UnsupportedError("pad of a non-tensor");
    if (is_complex(x->dtype)) throw UnsupportedError("complex dtype");
    std::vector<Expr> pads;
    for (auto& p : node.at("args")[1].items()) pads.push_back(int_arg(p));
    const int rank = x->rank();
    if (pads.size() % 2 || pads.size() / 2 > static_cast<size_t>(rank)) throw UnsupportedError("pad list");
    // A symbolic pad is >= 0: PyTorch's output size guards were traced with it.
    auto negative = [](const Expr& e) { return e.is_const() && e.value() < 0; };
    std::vector<Expr> lead(rank, Expr(0)), trail(rank, Expr(0));
    for (size_t i = 0; i < pads.size(); ++i) (i % 2 ? trail : lead)[rank - 1 - i / 2] = pads[i];
    Node* cur = x;
    for (int d = 0; d < rank; ++d) {
      if (!negative(lead[d]) && !negative(trail[d])) continue;
      Expr start = negative(lead[d]) ? Expr(0) - lead[d] : Expr(0);
      std::vector<Expr> shape = cur->shape;
      shape[d] = shape[d] - start - (negative(trail[d]) ? Expr(0) - trail[d] : Expr(0));
      cur = view(cur, "slice", shape);
      cur->view_args = {Expr(d), start, Expr(1)};
      if (negative(lead[d])) lead[d] = Expr(0);
    }
    if (cur->shape == m.shape) return cur;
    Node* v = view(cur, "pad", m.shape);
    v->view_args = lead;
    const Json& fill = arg(node, 2, "value");
    if (!fill.is_null()) {
      Operand o = operand(fill);
      if (o.node || o.sym) throw UnsupportedError("tensor or symbolic pad value");
      v->scalar = o.scalar;
      v->scalar_is_int = o.scalar_is_int;
    }
    return v;
  }

  // select_backward: the gradient placed at `index` along `dim` of zeros
  // of the input's sizes, a pad view of it (its decomposition, new_zeros and
  // select_scatter, costs AOTAutograd's trace ~2 ms a call).
  Node* lower_select_backward(const Json& node) {
    TensorMeta m = tensor_meta(node.at("meta"));
    Node* grad = tensor_arg(node.at("args")[0]);
    if (!grad || grad->dtype != m.dtype) throw UnsupportedError("select_backward operands");
    const int rank = static_cast<int>(m.shape.size());
    int64_t dim = const_int(node.at("args")[2]);
    if (dim < 0) dim += rank;
    if (dim < 0 || dim >= rank || grad->rank() != rank - 1) throw UnsupportedError("select_backward dim");
    int64_t index = const_int(node.at("args")[3]);
    std::vector<Expr> unsqueezed = grad->shape;
    unsqueezed.insert(unsqueezed.begin() + dim, Expr(1));
    std::vector<Expr> lead(rank, Expr(0));
    lead[dim] = index < 0 ? m.shape[dim] + Expr(index) : Expr(index);
    Node* v = view(view(grad, "reshape", unsqueezed), "pad", m.shape);
    v->view_args = lead;
    return v;
  }

  // Each element's coordinate along `dim` of `shape` (int64).
  Node* coordinate_along(int64_t dim, const std::vector<Expr>& shape) {
    std::vector<Expr> index_shape(shape.size() - dim, Expr(1));
    index_shape[0] = shape[dim];
    return broadcast(view(pointwise("iota", {}, {shape[dim]}, DType::Int64, DType::Int64), "reshape", index_shape),
                     shape);
  }
  // Whether `coordinate` < `bound` (a constant or a symbolic size).
  Node* below(Node* coordinate, const Expr& bound) {
    Operand o;
    o.scalar_is_int = true;
    if (bound.is_const()) o.scalar = static_cast<double>(bound.value());
    else o.sym = bound;
    return pointwise("lt", {coordinate, scalar_constant(o, DType::Int64, coordinate->shape)}, coordinate->shape,
                     DType::Bool, DType::Int64);
  }
  // `part` in its place along `dim` of `shape`, from `offset` on (zero elsewhere).
  Node* placed_at(Node* part, int64_t dim, const Expr& offset, const std::vector<Expr>& shape, DType dtype) {
    Node* placed = view(cast(part, dtype), "pad", shape);
    placed->view_args.assign(shape.size(), Expr(0));
    placed->view_args[dim] = offset;
    return placed;
  }

  // A slice's start as ATen takes it: a negative one counts from the end,
  // and it is clamped to [0, size]. A symbolic start may be negative (an int
  // argument Dynamo made symbolic), so it is normalized in the expression.
  static Expr slice_start(const Expr& start, const Expr& size) {
    if (start.is_const() && start.value() >= 0) {
      return size.is_const() && start.value() > size.value() ? size : start;
    }
    if (start.is_const()) return Expr::max(size + start, Expr(0));
    const Expr negative = Expr::min(Expr::max(Expr(0) - start, Expr(0)), Expr(1));  // 1 when start < 0
    return Expr::max(Expr::min(start + size * negative, size), Expr(0));
  }

  // slice_scatter(self, src, dim, start, end, step=1): src padded into its
  // place along dim, self elsewhere; one pointwise kernel with its
  // neighbours (a slice's backward: zeros and this), where ATen fills and
  // copies. Steps other than 1 stay an extern.
  Node* lower_slice_scatter(const Json& node) {
    TensorMeta m = tensor_meta(node.at("meta"));
    Node* self = tensor_arg(node.at("args")[0]);
    Node* src = tensor_arg(node.at("args")[1]);
    if (!self || !src || is_complex(m.dtype) || src->rank() != self->rank())
      throw UnsupportedError("slice_scatter operands");
    const int rank = self->rank();
    const Json& dim_arg = arg(node, 2, "dim");
    int64_t dim = dim_arg.is_null() ? 0 : const_int(dim_arg);
    if (dim < 0) dim += rank;
    if (dim < 0 || dim >= rank) throw UnsupportedError("slice_scatter dim out of range");
    const Json& step_arg = arg(node, 5, "step");
    if (!step_arg.is_null() && const_int(step_arg) != 1) throw UnsupportedError("slice_scatter with a step");
    const Json& start_arg = arg(node, 3, "start");
    const Expr start = slice_start(start_arg.is_null() ? Expr(0) : int_arg(start_arg), self->shape[dim]);
    // src's extent along dim is the slice's length (ATen checks it).
    const Expr end = start + src->shape[dim];
    Node* placed = placed_at(src, dim, start, m.shape, m.dtype);
    Node* index = coordinate_along(dim, m.shape);
    Node* base = cast(self, m.dtype);
    Node* inside = pointwise("where", {below(index, end), placed, base}, m.shape, m.dtype, compute_dtype(m.dtype));
    return pointwise("where", {below(index, start), base, inside}, m.shape, m.dtype, compute_dtype(m.dtype));
  }

  // cat: each part padded into its place along the dim, the first part
  // whose range holds the coordinate selected. Every element evaluates every
  // part's (clamped) load, so cats of many parts stay one extern copy.
  static constexpr size_t kMaxCatParts = 4;
  Node* lower_cat(const Json& node) {
    TensorMeta m = tensor_meta(node.at("meta"));
    if (is_complex(m.dtype)) throw UnsupportedError("complex dtype");
    const int rank = static_cast<int>(m.shape.size());
    const Json& dim_arg = arg(node, 1, "dim");
    int64_t dim = dim_arg.is_null() ? 0 : const_int(dim_arg);
    if (dim < 0) dim += rank;
    if (dim < 0 || dim >= rank) throw UnsupportedError("cat dim out of range");
    std::vector<Node*> parts;
    for (auto& item : node.at("args")[0].items()) {
      Node* t = tensor_arg(item);
      if (!t) throw ExternByDesign("cat of host tensors");
      if (is_complex(t->dtype)) throw UnsupportedError("complex dtype");
      // Legacy empty 1-d tensors and empty parts add nothing.
      if ((t->rank() == 1 && t->shape[0].equals(0) && rank != 1) || t->shape[dim].equals(0)) continue;
      if (t->rank() != rank) throw UnsupportedError("cat of tensors of different ranks");
      parts.push_back(t);
    }
    if (parts.size() > kMaxCatParts) throw ExternByDesign("cat of many parts");
    if (parts.empty()) return constant(0, true, m.dtype, m.shape);
    Node* index = coordinate_along(dim, m.shape);
    Node* result = nullptr;
    Expr offset(0);
    for (Node* t : parts) {
      Node* placed = placed_at(t, dim, offset, m.shape, m.dtype);
      if (result) {
        result = pointwise("where", {below(index, offset), result, placed}, m.shape, m.dtype, compute_dtype(m.dtype));
      } else {
        result = placed;
      }
      offset = offset + t->shape[dim];
    }
    return result;
  }

  // split/split_with_sizes/unbind: a tuple of views of the input along one
  // dim (slices, or selects for unbind), shaped as the output metadata says.
  Value lower_split(const Json& node, const std::string& base) {
    Node* x = tensor_arg(node.at("args")[0]);
    if (!x) throw UnsupportedError("split of a non-tensor");
    if (is_complex(x->dtype)) throw UnsupportedError("complex dtype");
    const Json& meta = node.at("meta");
    if (!meta.get("t").is_string() || meta.at("t").as_string() != "tuple")
      throw UnsupportedError("split without tuple metadata");
    const Json& dim_arg = arg(node, base == "aten.unbind" ? 1 : 2, "dim");
    int64_t dim = dim_arg.is_null() ? 0 : const_int(dim_arg);
    if (dim < 0) dim += x->rank();
    if (dim < 0 || dim >= x->rank()) throw UnsupportedError("split dim out of range");
    Value out;
    out.is_tuple = true;
    Expr start(0);
    for (size_t i = 0; i < meta.at("items").size(); ++i) {
      TensorMeta m = tensor_meta(meta.at("items")[i]);
      Node* v;
      if (base == "aten.unbind") {
        v = view(x, "select", m.shape);
        v->view_args = {Expr(dim), Expr(static_cast<int64_t>(i))};
      } else {
        if (m.shape.size() != x->shape.size()) throw UnsupportedError("split item of another rank");
        v = view(x, "slice", m.shape);
        v->view_args = {Expr(dim), start, Expr(1)};
        start = start + m.shape[dim];
      }
      v->meta_strides = m.strides;
      out.items.push_back(tensor(v));
    }
    return out;
  }

  // ---- externs ----------------------------------------------------------------
  void collect_refs(const Json& a, Node* e) {
    if (a.is_array()) {
      for (auto& x : a.items()) collect_refs(x, e);
    } else if (a.is_object()) {
      if (a.has("ref")) {
        const std::string& name = a.at("ref").as_string();
        const Value& v = value(name);
        if (v.is_tuple) throw CompileError("extern argument is a tuple value");
        if (!v.tensor) return;
        auto it = std::find(e->inputs.begin(), e->inputs.end(), v.tensor);
        if (it == e->inputs.end()) it = e->inputs.insert(e->inputs.end(), v.tensor);
        e->arg_names.emplace_back(name, static_cast<int>(it - e->inputs.begin()));
      } else {
        for (auto& [k, x] : a.members()) collect_refs(x, e);
      }
    }
  }

  Value make_extern(const Json& node, const std::string& target) {
    const std::string& name = node.at("name").as_string();
    Node* e = g_.add(NodeKind::Extern, target);
    e->fx_name = name;
    e->may_alias_inputs = !node.get("aliases").is_bool() || node.at("aliases").as_bool();
    collect_refs(node.at("args"), e);
    collect_refs(node.at("kwargs"), e);
    out_.externs.push_back(target);
    return extern_outputs(e, node.at("meta"), -1);
  }

  Value extern_outputs(Node* e, const Json& meta, int index) {
    Value v;
    const std::string& t = meta.get("t").is_string() ? meta.at("t").as_string() : "other";
    if (t == "tensor") {
      TensorMeta m = tensor_meta(meta);
      Node* o = g_.add(NodeKind::ExternOutput, "extern_output");
      o->inputs = {e};
      o->dtype = m.dtype;
      o->shape = m.shape;
      o->strides = m.strides;
      o->offset = m.offset;
      o->host = m.host;
      o->index = index;
      o->materialize = true;
      v.tensor = o;
    } else if (t == "tuple") {
      v.is_tuple = true;
      int i = 0;
      for (auto& item : meta.at("items").items()) {
        if (index >= 0) throw UnsupportedError("nested tuple output");
        v.items.push_back(extern_outputs(e, item, i++));
      }
    } else if (t == "sym") {
      v.sym = Expr::from_json(meta.at("expr"));
    } else {
      v.host = true;
    }
    return v;
  }

  LoweredGraph& out_;
  Graph& g_;
  const std::set<std::string>& forced_externs_;
  std::map<std::string, Value> values_;
};

}  // namespace

LoweredGraph lower_fx_graph(const Json& fx, const std::set<std::string>& forced_externs) {
  LoweredGraph out;
  Lowerer(out, forced_externs).run(fx);
  out.graph.compute_users();
  return out;
}

}  // namespace openneuron::compiler
