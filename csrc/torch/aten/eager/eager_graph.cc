#include "torch/aten/eager/eager_graph.h"

#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ops/_local_scalar_dense_native.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "torch/aten/eager/decompositions.h"
#include "torch/aten/eager/kernel_geometry.h"

namespace openneuron::integration {
namespace {

const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kBool: return "bool";
    case at::kByte: return "uint8";
    case at::kChar: return "int8";
    case at::kShort: return "int16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kComplexFloat: return "complex64";
    case at::kComplexDouble: return "complex128";
    default: return nullptr;
  }
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}


class Builder {
 public:
  Builder(const KernelGeometry& g) : g_(g) {
    for (int d = 0; d < g.rank(); ++d) sizes_.push_back(symbol(g.shape[d]));
  }

  // A tensor graph input: operand `k` of the geometry, its dims kept where
  // `keep` (a reduction's output keeps size 1 along reduced dims).
  std::string tensor_input(const at::Tensor& t, int k, bool is_output) {
    const std::string name = "t" + std::to_string(operands.size());
    operands.push_back(t);
    std::string shape = "[", stride = "[";
    for (int d = 0; d < g_.rank(); ++d) {
      // An output is reduced along the dims it does not step through (but
      // for the size-1 dim a reduction over none gets: every operand's).
      const bool size_one = is_output && g_.strides[k][d] == 0 && g_.shape[d] != 1;
      const int64_t s = g_.strides[k][d];
      shape += (d ? "," : "") + (size_one ? std::string("1") : sizes_[d]);
      // The innermost stride's class is part of the key; others are symbols.
      const bool literal = size_one || (d == g_.rank() - 1 && (s == 0 || s == 1));
      stride += (d ? "," : "") + (literal ? std::to_string(size_one ? 0 : s) : symbol(s));
    }
    inputs_ += std::string(inputs_.empty() ? "" : ",") + "{\"name\":\"" + name + "\",\"meta\":" +
               meta(t.scalar_type(), shape + "]", stride + "]") + "}";
    return name;
  }

  // A Python number: a float symbol (its double's bits), so a new value
  // reuses the kernel. Integers beyond a double's exact range stay literal.
  std::string scalar(const c10::Scalar& s) {
    const bool is_int = s.isIntegral(false);
    if (is_int && std::abs(s.toLong()) > (int64_t(1) << 53)) return std::to_string(s.toLong());
    const double v = is_int ? static_cast<double>(s.toLong()) : s.toDouble();
    const std::string name = "fs_" + std::to_string(float_symbols_.size());
    int64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    float_symbols_.push_back({name, bits});
    const std::string node = "c" + std::to_string(float_symbols_.size() - 1);
    nodes_ += "{\"name\":\"" + node + "\",\"target\":\"py.scalar\",\"args\":[],\"kwargs\":{},\"meta\":" +
              "{\"t\":\"symfloat\",\"name\":\"" + name + "\",\"int\":" + (is_int ? "true" : "false") +
              "},\"aliases\":false},";
    return "{\"ref\":\"" + node + "\"}";
  }

  static std::string meta(at::ScalarType dtype, const std::string& shape, const std::string& stride) {
    return std::string("{\"t\":\"tensor\",\"dtype\":\"") + dtype_name(dtype) + "\",\"shape\":" + shape +
           ",\"stride\":" + stride + ",\"offset\":0}";
  }

  // The meta of a value over the geometry: 1 along reduced dims when
  // `reduced`, laid out contiguously (the compiler's prefix form).
  std::string value_meta(at::ScalarType dtype, ValueShape kind) const {
    auto one = [&](int d) {
      return (kind == ValueShape::Row && g_.reduced[d]) || (kind == ValueShape::Column && !g_.reduced[d]);
    };
    std::string shape = "[", stride = "[";
    for (int d = 0; d < g_.rank(); ++d) {
      shape += (d ? "," : "") + (one(d) ? std::string("1") : sizes_[d]);
      std::string product = "1";
      for (int e = g_.rank() - 1; e > d; --e)
        if (!one(e))
          product = product == "1" ? sizes_[e] : "[\"mul\"," + product + "," + sizes_[e] + "]";
      stride += (d ? "," : "") + product;
    }
    return meta(dtype, shape + "]", stride + "]");
  }

  // The reduced dims of the geometry (or the others), as a JSON list.
  std::string reduced_dims(bool reduced) const {
    std::string dims = "[";
    for (int d = 0; d < g_.rank(); ++d)
      if (g_.reduced[d] == reduced) dims += (dims.size() > 1 ? "," : "") + std::to_string(d);
    return dims + "]";
  }

  // Appends an FX node; returns a reference to it. `op_result`: the call's
  // value (not a node of its decomposition), which a 16-bit kernel rounds
  // to its dtype before a later call of a fused chain reads it.
  std::string node(const std::string& name, const std::string& target, const std::string& args,
                   const std::string& kwargs, const std::string& meta, bool op_result = false) {
    nodes_ += "{\"name\":\"" + name + "\",\"target\":" + quoted(target) + ",\"args\":[" + args +
              "],\"kwargs\":{" + kwargs + "},\"meta\":" + meta + ",\"aliases\":false" +
              (op_result ? ",\"op_result\":true" : "") + "},";
    return "{\"ref\":\"" + name + "\"}";
  }

  // The graph: each (value, output) pair's value stored into the output;
  // `metas` the stores' metas (one for all, or one each).
  std::string finish(const std::vector<std::pair<std::string, std::string>>& stores,
                     const std::vector<std::string>& metas) {
    std::string json = "{\"inputs\":[" + inputs_ + "],\"nodes\":[" + nodes_;
    for (size_t i = 0; i < stores.size(); ++i)
      json += std::string(i ? "," : "") + "{\"name\":\"w" + std::to_string(i) +
              "\",\"target\":\"aten.copy_.default\",\"args\":[{\"ref\":\"" + stores[i].second +
              "\"},{\"ref\":\"" + stores[i].first + "\"}],\"kwargs\":{},\"meta\":" +
              metas[metas.size() == 1 ? 0 : i] + ",\"aliases\":true}";
    json += "],\"outputs\":[],\"symbols\":[";
    for (size_t i = 0; i < symbol_names_.size(); ++i) json += (i ? "," : "") + symbol_names_[i];
    for (size_t i = 0; i < float_symbols_.size(); ++i) {
      json += (i || !symbol_names_.empty() ? ",\"" : "\"") + float_symbols_[i].first + "\"";
      symbols.push_back(float_symbols_[i].second);
    }
    return json + "]}";
  }

  std::vector<at::Tensor> operands;
  std::vector<int64_t> symbols;

 private:
  std::string symbol(int64_t value) {
    std::string name = "\"s" + std::to_string(symbol_names_.size()) + "\"";
    symbol_names_.push_back(name);
    symbols.push_back(value);
    return name;
  }

  const KernelGeometry& g_;
  std::vector<std::string> sizes_, symbol_names_;
  std::vector<std::pair<std::string, int64_t>> float_symbols_;
  std::string inputs_, nodes_;
};

bool is_neuron_tensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && !v.toTensor().device().is_cpu();
}

// An argument that is a literal of the graph (and of its key), or nullopt.
std::optional<std::string> literal(const c10::IValue& v, const c10::Argument& arg) {
  c10::TypePtr type = arg.real_type();
  if (v.isTensor() && !v.toTensor().defined()) return "null";  // an absent Tensor? (autograd passes these)
  if (type->kind() == c10::TypeKind::OptionalType) {
    if (v.isNone()) return "null";
    type = type->expectRef<c10::OptionalType>().getElementType();
  }
  switch (type->kind()) {
    case c10::TypeKind::ScalarTypeType: {
      const char* name = dtype_name(static_cast<at::ScalarType>(v.toInt()));
      if (!name) return std::nullopt;
      return std::string("{\"dtype\":\"") + name + "\"}";
    }
    case c10::TypeKind::MemoryFormatType:
      switch (static_cast<c10::MemoryFormat>(v.toInt())) {
        case c10::MemoryFormat::Contiguous: return "{\"enum\":\"torch.contiguous_format\"}";
        case c10::MemoryFormat::Preserve: return "{\"enum\":\"torch.preserve_format\"}";
        case c10::MemoryFormat::ChannelsLast: return "{\"enum\":\"torch.channels_last\"}";
        case c10::MemoryFormat::ChannelsLast3d: return "{\"enum\":\"torch.channels_last_3d\"}";
        default: return std::nullopt;
      }
    case c10::TypeKind::IntType: return std::to_string(v.toInt());
    case c10::TypeKind::FloatType: return json_number(v.toDouble());
    case c10::TypeKind::BoolType: return v.toBool() ? "true" : "false";
    case c10::TypeKind::StringType: return quoted(std::string(v.toStringRef()));
    case c10::TypeKind::ListType: {
      if (v.isBoolList()) {
        std::string out = "[";
        for (bool b : v.toBoolList()) out += std::string(out.size() > 1 ? "," : "") + (b ? "true" : "false");
        return out + "]";
      }
      if (!v.isIntList()) return std::nullopt;
      std::string out = "[";
      for (int64_t i : v.toIntVector()) out += (out.size() > 1 ? "," : "") + std::to_string(i);
      return out + "]";
    }
    case c10::TypeKind::NumberType:  // a Scalar: alpha is a compile-time constant to the compiler
      if (v.isBool()) return v.toBool() ? "true" : "false";
      if (v.isInt()) return std::to_string(v.toInt());
      if (v.isDouble()) return json_number(v.toDouble());
      return std::nullopt;
    default: return std::nullopt;
  }
}

// Scalars the graph needs as constants: add's alpha (the compiler folds
// it), lerp's weight (it picks the formula), a norm's order, pow's exponent
// (x ** 2 is a multiply, not a call of pow).
bool literal_scalar(const EagerOp& op, const std::string& name) {
  return name == "alpha" || (name == "weight" && op.target == "aten.lerp.Scalar") || name == "ord" ||
         name == "correction" ||
         (name == "exponent" && op.target == "aten.pow.Tensor_Scalar");
}

// A Scalar or Scalar? argument.
bool is_number_type(const c10::Argument& arg) {
  c10::TypePtr type = arg.real_type();
  if (type->kind() == c10::TypeKind::OptionalType) type = type->expectRef<c10::OptionalType>().getElementType();
  return type->kind() == c10::TypeKind::NumberType;
}

// Dims the reduction runs over, as flags on `rank` dims ("dim" null or
// empty: all of them).
std::vector<bool> reduced_dims(const EagerOp& op, c10::ArrayRef<c10::IValue> args, int64_t rank) {
  std::vector<bool> reduced(rank, true);
  if (op.normalized_arg >= 0) {  // layer norm: the trailing dims it normalizes
    const int64_t n = static_cast<int64_t>(args[op.normalized_arg].toIntVector().size());
    for (int64_t d = 0; d < rank - n; ++d) reduced[d] = false;
    return reduced;
  }
  if (op.dim_arg < 0 || args[op.dim_arg].isNone()) return reduced;
  const c10::IValue& dim = args[op.dim_arg];
  std::vector<int64_t> dims = dim.isInt() ? std::vector<int64_t>{dim.toInt()} : dim.toIntVector();
  if (dims.empty() || rank == 0) return reduced;
  std::fill(reduced.begin(), reduced.end(), false);
  for (int64_t d : dims) reduced[c10::maybe_wrap_dim(d, rank)] = true;
  return reduced;
}


// A reduction's output seen along its input's dims: stride 0 along the
// reduced dims (which it lacks unless keepdim).
std::vector<int64_t> output_strides_along_input(const at::Tensor& out, const std::vector<bool>& reduced,
                                                bool keepdim) {
  std::vector<int64_t> strides(reduced.size(), 0);
  for (int64_t d = 0, o = 0; d < static_cast<int64_t>(reduced.size()); ++d) {
    if (reduced[d] && !keepdim) continue;
    if (!reduced[d]) strides[d] = out.stride(o);
    ++o;
  }
  return strides;
}

// Ops whose value costs far more than its memory traffic (a libm call).
bool costly_to_recompute(const EagerOp& op) {
  static const char* const kCostly[] = {"exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "tanh", "sigmoid",
                                        "erf", "erfc", "erfinv", "pow", "sin", "cos", "tan", "asin", "acos", "atan",
                                        "sinh", "cosh", "asinh", "acosh", "atanh", "gelu", "silu", "mish", "softplus",
                                        "lgamma", "digamma", "logit", "atan2", "hypot", "elu", "celu", "selu"};
  // "aten.exp.default" -> "exp"
  const std::string& t = op.target;
  const size_t start = t.find('.') + 1, end = t.find('.', start);
  const std::string name = t.substr(start, end == std::string::npos ? std::string::npos : end - start);
  for (const char* c : kCostly)
    if (name == c) return true;
  return false;
}

// Reduced dims all of size 1 (merged away): a reduction over one more.
void reduce_over_one_when_none(KernelGeometry& g) {
  if (std::find(g.reduced.begin(), g.reduced.end(), true) != g.reduced.end()) return;
  g.shape.push_back(1);
  g.reduced.push_back(true);
  for (auto& s : g.strides) s.push_back(0);
}

// An integer the compiler's scalars (doubles) would round.
bool beyond_double(const c10::Scalar& s) {
  return s.isIntegral(false) && std::abs(s.toLong()) > (int64_t(1) << 53);
}

// A call's arguments as graph text.
struct CallText {
  std::vector<std::string> refs;             // the tensor arguments' references, in order
  std::map<std::string, std::string> named;  // every argument's text, by name
  std::string positional, keywords;
};

// Writes the call's arguments: `tensor(i)` gives neuron tensor argument i's
// reference, `self` an in-place op's self (its value before the call).
bool call_text(const EagerOp& op, const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
               const KernelGeometry& g, Builder& b, const std::function<std::string(size_t)>& tensor,
               const std::string& self, CallText* c, std::string* why) {
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int>(i) == op.out_arg && op.form == EagerOp::Form::Out) continue;
    const c10::Argument& arg = arguments[i];
    const c10::IValue& v = args[i];
    std::string text;
    if (op.form == EagerOp::Form::InPlace && static_cast<int>(i) == op.out_arg) {
      text = self;
    } else if (is_neuron_tensor(v)) {
      text = tensor(i);
      c->refs.push_back(text);
    } else if (v.isTensor() && v.toTensor().defined()) {
      // A CPU tensor: a Python number PyTorch wrapped is a scalar; anything
      // else promotes differently and stays on the fallback.
      const at::Tensor& t = v.toTensor();
      if (!t.unsafeGetTensorImpl()->is_wrapped_number() || t.is_complex()) {
        *why = "a CPU tensor argument";
        return false;
      }
      // Read in place: item() would dispatch (a dispatch mode sees a number).
      const c10::Scalar s = at::native::_local_scalar_dense_cpu(t);
      if (beyond_double(s)) {
        *why = "an integer beyond float64's exact range";
        return false;
      }
      text = b.scalar(s);
    } else if (static_cast<int>(i) == op.dim_arg) {
      std::string dims = "[";
      int count = 0, last = -1;
      for (int d = 0; d < g.rank(); ++d)
        if (g.reduced[d]) dims += (count++ ? "," : "") + std::to_string(last = d);
      // prod takes one dim.
      text = v.isInt() ? (count == 1 ? std::to_string(last) : "null") : dims + "]";
      if (text == "null") {
        *why = "a reduction over several dims at once";
        return false;
      }
    } else if (static_cast<int>(i) == op.keepdim_arg) {
      text = "true";
    } else if (is_number_type(arg) && !v.isNone() && !v.isBool() && !literal_scalar(op, arg.name())) {
      if (v.isComplexDouble()) {
        *why = "a complex scalar";
        return false;
      }
      if (beyond_double(v.toScalar())) {
        *why = "an integer beyond float64's exact range";
        return false;
      }
      text = b.scalar(v.toScalar());
    } else if (auto lit = literal(v, arg)) {
      text = *lit;
    } else {
      *why = "argument '" + arg.name() + "' of type " + arg.type()->str();
      return false;
    }
    c->named[arg.name()] = text;
    if (arg.kwarg_only())
      c->keywords += (c->keywords.empty() ? "" : ",") + quoted(arg.name()) + ":" + text;
    else
      c->positional += (c->positional.empty() ? "" : ",") + text;
  }
  if (op.target == "aten.full_like.default" && args.size() == 1) c->positional += ",0";  // zero_()
  return true;
}

// Writes the op's value node(s): "v" (or "v0", "v1", ... one per result),
// named with `prefix` (a fused chain's call), other nodes "<prefix>d_...".
bool value_nodes(const EagerOp& op, Builder& b, const CallText& c, const std::string& prefix,
                 at::ScalarType out_dtype, at::ScalarType input_dtype, std::string* why) {
  const bool reduces = op.family == EagerOp::Family::Reduction;
  GraphWriter w;
  w.node = [&b, &prefix](const std::string& name, const std::string& target, const std::string& args,
                         const std::string& meta) {
    // Its own names cannot shadow the graph's inputs (t0, t1, ...).
    const bool value = name[0] == 'v' && (name.size() == 1 || std::isdigit(static_cast<unsigned char>(name[1])));
    return b.node(prefix + (value ? name : "d_" + name), target, args, "", meta, value);
  };
  w.node_kw = [&b, &prefix](const std::string& name, const std::string& target, const std::string& args,
                            const std::string& kwargs, const std::string& meta) {
    return b.node(prefix + "d_" + name, target, args, kwargs, meta);
  };
  w.meta = [&b](at::ScalarType dtype, ValueShape kind) { return b.value_meta(dtype, kind); };
  w.dims = b.reduced_dims(true);
  w.lead_dims = b.reduced_dims(false);
  if (op.family == EagerOp::Family::Row) {
    if (!row_decomposition(w, op.target, c.refs, c.named, input_dtype)) {
      *why = "no row decomposition";
      return false;
    }
  } else if (op.decomposed && reduces) {
    if (!reduction_decomposition(w, op.target, c.named, out_dtype)) {
      *why = "no decomposition for these arguments";
      return false;
    }
  } else if (op.decomposed) {
    if (!pointwise_decomposition(w, op.target, c.named, out_dtype)) {
      *why = "no decomposition for these arguments";
      return false;
    }
  } else {
    b.node(prefix + "v", op.target, c.positional, c.keywords,
           b.value_meta(out_dtype, reduces ? ValueShape::Row : ValueShape::Full), /*op_result=*/true);
  }
  return true;
}

}  // namespace

std::optional<EagerGraph> eager_graph(const EagerOp& op, const c10::FunctionSchema& schema,
                                      c10::ArrayRef<c10::IValue> args, const std::vector<at::Tensor>& outs,
                                      std::string* why) {
  // The iteration geometry over the output (pointwise) or the input (reductions).
  std::vector<const at::Tensor*> tensors;
  std::vector<int> written;  // the result each written operand holds
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].defined()) {
      tensors.push_back(&outs[k]);
      written.push_back(static_cast<int>(k));
    }
  if (tensors.empty()) {
    *why = "no result to write";
    return std::nullopt;
  }
  const at::Tensor& out = *tensors[0];
  const size_t first_input = tensors.size();
  std::vector<int> tensor_of_arg(args.size(), -1);
  for (size_t i = 0; i < args.size(); ++i) {
    if (static_cast<int>(i) == op.out_arg || !is_neuron_tensor(args[i])) continue;
    if (op.form == EagerOp::Form::InPlace && static_cast<int>(i) == op.out_arg) continue;
    tensor_of_arg[i] = static_cast<int>(tensors.size());
    tensors.push_back(&args[i].toTensor());
  }
  // Dtypes the compiler has (not float8, not the quantized ones).
  for (const at::Tensor* t : tensors)
    if (!dtype_name(t->scalar_type())) {
      *why = std::string("dtype ") + c10::toString(t->scalar_type());
      return std::nullopt;
    }
  std::vector<int64_t> shape;
  std::vector<bool> reduced;
  std::vector<std::vector<int64_t>> strides;
  if (op.family == EagerOp::Family::Reduction) {
    if (tensors.size() != 2 || first_input != 1) {
      *why = "a reduction of several tensors";
      return std::nullopt;
    }
    const at::Tensor& x = *tensors[1];
    shape = x.sizes().vec();
    reduced = reduced_dims(op, args, x.dim());
    const bool keepdim = op.keepdim_arg >= 0 && args[op.keepdim_arg].toBool();
    strides = {output_strides_along_input(out, reduced, keepdim), x.strides().vec()};
  } else {
    // A row op (softmax, layer norm) reduces along some dims inside and
    // iterates over its first input's shape.
    shape = op.family == EagerOp::Family::Row && tensors.size() > first_input ? tensors[first_input]->sizes().vec()
                                                                                : out.sizes().vec();
    if (op.family == EagerOp::Family::Row) reduced = reduced_dims(op, args, static_cast<int64_t>(shape.size()));
    for (const at::Tensor* t : tensors)
      strides.push_back(broadcast_strides(shape, t->sizes().data(), t->strides().data(), t->dim()));
  }
  KernelGeometry g = make_kernel_geometry(shape, reduced, strides, op.family == EagerOp::Family::Pointwise);
  if (op.family != EagerOp::Family::Pointwise) reduce_over_one_when_none(g);

  Builder b(g);
  std::vector<std::string> out_names;
  for (size_t k = 0; k < first_input; ++k) out_names.push_back(b.tensor_input(*tensors[k], static_cast<int>(k), true));
  const std::string& out_name = out_names[0];
  CallText c;
  auto tensor = [&](size_t i) {
    return "{\"ref\":\"" + b.tensor_input(*tensors[tensor_of_arg[i]], tensor_of_arg[i], false) + "\"}";
  };
  if (!call_text(op, schema, args, g, b, tensor, "{\"ref\":\"" + out_name + "\"}", &c, why)) return std::nullopt;
  const at::ScalarType input_dtype = tensors.size() > first_input ? tensors[first_input]->scalar_type()
                                                                  : out.scalar_type();
  if (!value_nodes(op, b, c, "", out.scalar_type(), input_dtype, why)) return std::nullopt;
  EagerGraph graph;
  const std::string out_meta =
      b.value_meta(out.scalar_type(), op.family == EagerOp::Family::Reduction ? ValueShape::Row : ValueShape::Full);
  std::vector<std::pair<std::string, std::string>> stores;
  if (op.results == 1) {
    stores.push_back({"v", out_name});
  } else {
    for (size_t j = 0; j < out_names.size(); ++j) stores.push_back({"v" + std::to_string(written[j]), out_names[j]});
  }
  graph.json = b.finish(stores, {out_meta});
  graph.operands = std::move(b.operands);
  graph.symbols = std::move(b.symbols);
  return graph;
}

}  // namespace openneuron::integration

namespace openneuron::integration {
namespace {

int find_key(const std::vector<TensorKey>& keys, const TensorKey& k) {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == k) return static_cast<int>(i);
  return -1;
}

// A costly value (softmax's exp) computed before the chain's last
// reduction and needed after it, directly or through other values: where
// the target does not keep the row's values (GLSL; C++ rows over
// kRowCacheMax), the kernel's last pass over the row would compute it
// again, which costs more on a CPU than storing it from the pass before and
// reading it back (softmax as 5 ops: 2.5 ms as one kernel, 2.2 ms cut after
// the sum; 1.9 ms as one kernel keeping the row). The index of such a call,
// or -1.
int costly_value_past_a_reduction(const std::vector<HeldCall>& calls, const std::vector<TensorKey>& out_keys) {
  int last_reduction = -1;
  for (size_t c = 0; c < calls.size(); ++c)
    if (calls[c].op->family == EagerOp::Family::Reduction) last_reduction = static_cast<int>(c);
  std::vector<bool> needed(calls.size(), false);
  auto mark_reads = [&](size_t d) {  // the earlier calls whose results call d reads
    for (const auto& v : calls[d].args) {
      if (!is_neuron_tensor(v)) continue;
      const TensorKey k = key_of(v.toTensor());
      for (size_t c = d; c-- > 0;)
        if (out_keys[c] == k) {
          needed[c] = true;
          break;
        }
    }
  };
  for (size_t d = last_reduction + 1; d < calls.size(); ++d) mark_reads(d);
  for (int c = last_reduction; c-- > 0;) {
    if (!needed[c] || calls[c].op->family == EagerOp::Family::Reduction) continue;  // (a row value is kept)
    if (costly_to_recompute(*calls[c].op)) return c;
    mark_reads(c);
  }
  return -1;
}

bool reads_arg(const EagerOp& op, size_t i, const c10::IValue& v) {
  return is_neuron_tensor(v) && !(op.form == EagerOp::Form::Out && static_cast<int>(i) == op.out_arg);
}

}  // namespace

std::optional<EagerGraph> fused_graph(const std::vector<HeldCall>& calls, c10::IntArrayRef shape,
                                      int64_t cached_row_max, std::string* why) {
  // The graph's tensors: results that reach memory (each one's last write),
  // then the tensors the chain reads before writing them.
  std::vector<TensorKey> written, stored_keys, input_keys;
  std::vector<const at::Tensor*> stored, inputs;
  std::vector<std::pair<int, int>> stored_sources, input_sources;
  std::vector<TensorKey> out_keys;
  for (size_t c = 0; c < calls.size(); ++c) {
    const HeldCall& call = calls[c];
    for (size_t i = 0; i < call.args.size(); ++i) {
      if (!reads_arg(*call.op, i, call.args[i])) continue;
      const at::Tensor& t = call.args[i].toTensor();
      const TensorKey k = key_of(t);
      if (find_key(written, k) < 0 && find_key(input_keys, k) < 0) {
        input_keys.push_back(k);
        inputs.push_back(&t);
        input_sources.push_back({static_cast<int>(c), static_cast<int>(i)});
      }
    }
    out_keys.push_back(key_of(call.out));
    if (find_key(written, out_keys.back()) < 0) written.push_back(out_keys.back());
  }
  for (size_t c = calls.size(); c-- > 0;) {  // last writes first found
    if (!calls[c].store || find_key(stored_keys, out_keys[c]) >= 0) continue;
    bool later = false;  // a later call writes it again: that one stores
    for (size_t d = c + 1; d < calls.size(); ++d) later |= out_keys[d] == out_keys[c];
    if (later) continue;
    stored_keys.push_back(out_keys[c]);
    stored.push_back(&calls[c].out);
    stored_sources.push_back({static_cast<int>(c), -1});
  }
  if (stored.empty()) {
    *why = "no result is used";
    return std::nullopt;
  }
  // Reductions over the chain's shape, all over the same dims: the geometry
  // reduces those dims, a later call reads a reduction's value broadcast
  // along them, and pointwise results still held are stored from inside
  // the loops.
  auto is_reduction = [&](size_t c) { return calls[c].op->family == EagerOp::Family::Reduction; };
  int first_reduction = -1;
  for (size_t c = 0; c < calls.size() && first_reduction < 0; ++c)
    if (is_reduction(c)) first_reduction = static_cast<int>(c);
  const bool reduction = first_reduction >= 0;
  std::vector<bool> reduced;
  if (reduction) {
    // Stored values beside the reduction going to memory the kernel does
    // not read (fresh results) are written from inside the reduction's loop
    // (compiler/codegen/reduction_stores.h). Stored over a tensor the chain
    // reads (an in-place call), a value is computed again after the loop:
    // cheap arithmetic, but a transcendental (softmax's exp) would cost
    // more twice than a second kernel's pass.
    bool in_place = false;
    for (const HeldCall& c : calls) in_place |= c.op->form == EagerOp::Form::InPlace;
    if (stored.size() > 1 && in_place)
      for (size_t c = 0; c + 1 < calls.size(); ++c)
        if (costly_to_recompute(*calls[c].op)) {
          *why = "a stored value beside the reduction would compute " + calls[c].op->name + " twice";
          return std::nullopt;
        }
    const auto rank = static_cast<int64_t>(shape.size());
    reduced = reduced_dims(*calls[first_reduction].op, calls[first_reduction].args, rank);
    int64_t row = 1;
    for (int64_t d = 0; d < rank; ++d) row *= reduced[d] ? shape[d] : 1;
    if (row > cached_row_max)
      if (const int c = costly_value_past_a_reduction(calls, out_keys); c >= 0) {
        *why = "the pass after a reduction would compute " + calls[c].op->name + " again";
        return std::nullopt;
      }
    for (size_t c = first_reduction + 1; c < calls.size(); ++c)
      if (is_reduction(c) && reduced_dims(*calls[c].op, calls[c].args, rank) != reduced) {
        *why = "the chain's reductions reduce different dims";
        return std::nullopt;
      }
  }
  std::vector<std::vector<int64_t>> strides;
  for (size_t k = 0; k < stored.size(); ++k) {
    const at::Tensor* t = stored[k];
    const HeldCall& call = calls[stored_sources[k].first];
    if (is_reduction(stored_sources[k].first)) {
      const bool keepdim = call.op->keepdim_arg >= 0 && call.args[call.op->keepdim_arg].toBool();
      strides.push_back(output_strides_along_input(call.out, reduced, keepdim));
    } else {
      strides.push_back(broadcast_strides(shape.vec(), t->sizes().data(), t->strides().data(), t->dim()));
    }
  }
  for (const at::Tensor* t : inputs)
    strides.push_back(broadcast_strides(shape.vec(), t->sizes().data(), t->strides().data(), t->dim()));
  KernelGeometry g = make_kernel_geometry(shape.vec(), reduced, strides, !reduction);
  if (reduction) reduce_over_one_when_none(g);

  Builder b(g);
  std::vector<std::string> stored_names;
  for (size_t k = 0; k < stored.size(); ++k) stored_names.push_back(b.tensor_input(*stored[k], static_cast<int>(k), true));
  std::vector<TensorKey> value_keys = input_keys;  // the current value of each tensor
  std::vector<std::string> values;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string name = b.tensor_input(*inputs[k], static_cast<int>(stored.size() + k), false);
    // A tensor read and then written (x.mul_(2) at the chain's start) is
    // read through the placeholder it is stored into: the compiler then
    // knows the store goes over memory the kernel reads, and writes it after
    // every read (a second placeholder of the same memory would hide that).
    const int s = find_key(stored_keys, input_keys[k]);
    values.push_back("{\"ref\":\"" + (s >= 0 ? stored_names[s] : name) + "\"}");
  }
  auto value_of = [&](const at::Tensor& t) {
    const int i = find_key(value_keys, key_of(t));
    TORCH_INTERNAL_ASSERT(i >= 0, "a fused call reads a tensor the chain has no value of");
    return values[i];
  };
  for (size_t c = 0; c < calls.size(); ++c) {
    const HeldCall& call = calls[c];
    const EagerOp& op = *call.op;
    c10::ArrayRef<c10::IValue> args(call.args);
    const std::string self = op.form == EagerOp::Form::InPlace ? value_of(args[op.out_arg].toTensor()) : "";
    CallText text;
    auto tensor = [&](size_t i) { return value_of(args[i].toTensor()); };
    if (!call_text(op, *call.schema, args, g, b, tensor, self, &text, why)) return std::nullopt;
    at::ScalarType input_dtype = call.out.scalar_type();
    for (size_t i = 0; i < args.size(); ++i)
      if (reads_arg(op, i, args[i])) {
        input_dtype = args[i].toTensor().scalar_type();
        break;
      }
    const std::string prefix = "o" + std::to_string(c) + "_";
    if (!value_nodes(op, b, text, prefix, call.out.scalar_type(), input_dtype, why)) return std::nullopt;
    const std::string ref = "{\"ref\":\"" + prefix + "v\"}";
    const int i = find_key(value_keys, out_keys[c]);
    if (i >= 0) {
      values[i] = ref;
    } else {
      value_keys.push_back(out_keys[c]);
      values.push_back(ref);
    }
  }
  std::vector<std::pair<std::string, std::string>> stores;
  std::vector<std::string> metas;
  for (size_t k = 0; k < stored.size(); ++k) {
    const std::string& ref = values[find_key(value_keys, stored_keys[k])];  // {"ref":"name"}
    stores.push_back({ref.substr(8, ref.size() - 10), stored_names[k]});
    const bool reduced_value = is_reduction(stored_sources[k].first);
    metas.push_back(b.value_meta(stored[k]->scalar_type(), reduced_value ? ValueShape::Row : ValueShape::Full));
  }
  EagerGraph graph;
  graph.json = b.finish(stores, metas);
  graph.operands = std::move(b.operands);
  graph.symbols = std::move(b.symbols);
  graph.sources = std::move(stored_sources);
  graph.sources.insert(graph.sources.end(), input_sources.begin(), input_sources.end());
  return graph;
}

}  // namespace openneuron::integration
