#include "torch/aten/eager/decompositions.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>

namespace openneuron::integration {

std::string json_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // A float keeps its point, so it is read back as a float.
  if (!std::strpbrk(buf, ".eE")) std::strcat(buf, ".0");
  return buf;
}

// A row op's value "v" from its tensor arguments: softmax and log_softmax
// and their backwards, as PyTorch decomposes them, computed in float32 for
// 16-bit inputs (PyTorch's CPU kernels accumulate in float too).
namespace {

// native_layer_norm(input, normalized_shape, weight, bias, eps) -> out, mean, rstd
// and its backward (-> grad_input, grad_weight, grad_bias), as PyTorch's
// decompositions write them, in `ct`.
bool layer_norm(GraphWriter& b, const std::string& target, const std::map<std::string, std::string>& args,
                bool narrow, at::ScalarType ct) {
  const std::string full = b.meta(ct, ValueShape::Full), row = b.meta(ct, ValueShape::Row);
  const std::string column = b.meta(ct, ValueShape::Column);
  auto arg = [&](const char* name) {
    auto it = args.find(name);
    return it == args.end() ? std::string("null") : it->second;
  };
  int ups = 0;
  auto up = [&](const std::string& ref) {
    return narrow ? b.node("up" + std::to_string(ups++), "prims.convert_element_type.default",
                           ref + ",{\"dtype\":\"float32\"}", full)
                  : ref;
  };
  auto op = [&](const std::string& name, const char* target, const std::string& x, const std::string& y,
                const std::string& meta) { return b.node(name, target, x + "," + y, meta); };
  auto mean = [&](const std::string& name, const std::string& x) {
    return b.node(name, "aten.mean.dim", x + "," + b.dims + ",true", row);
  };
  // A sum over the leading dims (none: the value itself).
  auto column_sum = [&](const std::string& name, const std::string& x) {
    return b.lead_dims == "[]" ? b.node(name, "aten.clone.default", x, column)
                               : b.node(name, "aten.sum.dim_IntList", x + "," + b.lead_dims + ",true", column);
  };
  const std::string weight = arg("weight"), bias = arg("bias");
  if (target == "aten.native_layer_norm.default") {
    const std::string x = up(arg("input"));
    const std::string m = mean("v1", x);
    const std::string xc = op("xc", "aten.sub.Tensor", x, m, full);
    const std::string var = mean("var", op("sq", "aten.mul.Tensor", xc, xc, full));
    const std::string rstd = b.node("v2", "aten.rsqrt.default", op("ve", "aten.add.Tensor", var, arg("eps"), row), row);
    std::string y = op(weight == "null" && bias == "null" ? "v0" : "y", "aten.mul.Tensor", xc, rstd, full);
    if (weight != "null") y = op(bias == "null" ? "v0" : "yw", "aten.mul.Tensor", y, up(weight), full);
    if (bias != "null") op("v0", "aten.add.Tensor", y, up(bias), full);
    return true;
  }
  if (target == "aten.native_layer_norm_backward.default") {
    const std::string g = up(arg("grad_out")), x = up(arg("input"));
    const std::string xhat = op("xhat", "aten.mul.Tensor", op("xc", "aten.sub.Tensor", x, up(arg("mean")), full),
                                up(arg("rstd")), full);
    const std::string gw = weight == "null" ? g : op("gw", "aten.mul.Tensor", g, up(weight), full);
    const std::string a = mean("a", gw);
    const std::string c = mean("c", op("gx", "aten.mul.Tensor", gw, xhat, full));
    const std::string d = op("d", "aten.sub.Tensor", op("ga", "aten.sub.Tensor", gw, a, full),
                             op("xcb", "aten.mul.Tensor", xhat, c, full), full);
    op("v0", "aten.mul.Tensor", d, up(arg("rstd")), full);
    column_sum("v1", op("gxh", "aten.mul.Tensor", g, xhat, full));
    column_sum("v2", g);
    return true;
  }
  return false;
}

}  // namespace

bool row_decomposition(GraphWriter& b, const std::string& target, const std::vector<std::string>& refs,
                       const std::map<std::string, std::string>& args, at::ScalarType dtype) {
  const bool narrow = dtype == at::kHalf || dtype == at::kBFloat16;
  const at::ScalarType ct = narrow ? at::kFloat : dtype;
  if (target.rfind("aten.native_layer_norm", 0) == 0) return layer_norm(b, target, args, narrow, ct);
  const std::string full = b.meta(ct, ValueShape::Full), row = b.meta(ct, ValueShape::Row), dims = b.dims;
  std::vector<std::string> in;
  for (size_t i = 0; i < refs.size(); ++i)
    in.push_back(narrow ? b.node("up" + std::to_string(i), "prims.convert_element_type.default",
                                 refs[i] + ",{\"dtype\":\"float32\"}", full)
                        : refs[i]);
  auto sum = [&](const std::string& name, const std::string& x) {
    return b.node(name, "aten.sum.dim_IntList", x + "," + dims + ",true", row);
  };
  auto binary = [&](const std::string& name, const char* op, const std::string& x, const std::string& y) {
    return b.node(name, op, x + "," + y, full);
  };
  if (target == "aten._softmax.default" || target == "aten._log_softmax.default") {
    const std::string m = b.node("m", "aten.amax.default", in[0] + "," + dims + ",true", row);
    const std::string y = binary("y", "aten.sub.Tensor", in[0], m);
    const std::string e = b.node("e", "aten.exp.default", y, full);
    const std::string s = sum("s", e);
    if (target == "aten._softmax.default") {
      binary("v", "aten.div.Tensor", e, s);
    } else {
      binary("v", "aten.sub.Tensor", y, b.node("l", "aten.log.default", s, row));
    }
    return true;
  }
  if (target == "aten._softmax_backward_data.default") {  // y * (g - sum(g * y))
    const std::string s = sum("s", binary("p", "aten.mul.Tensor", in[0], in[1]));
    binary("v", "aten.mul.Tensor", in[1], binary("d", "aten.sub.Tensor", in[0], s));
    return true;
  }
  if (target == "aten._log_softmax_backward_data.default") {  // g - exp(y) * sum(g)
    const std::string s = sum("s", in[0]);
    const std::string e = b.node("e", "aten.exp.default", in[1], full);
    binary("v", "aten.sub.Tensor", in[0], binary("p", "aten.mul.Tensor", e, s));
    return true;
  }
  return false;
}

bool pointwise_decomposition(GraphWriter& b, const std::string& target,
                             const std::map<std::string, std::string>& args, at::ScalarType dtype) {
  const std::string m = b.meta(dtype, ValueShape::Full);
  auto arg = [&](const char* name) {
    auto it = args.find(name);
    return it == args.end() ? std::string() : it->second;
  };
  auto op = [&](const std::string& name, const char* target, const std::string& x, const std::string& y = "") {
    return b.node(name, target, y.empty() ? x : x + "," + y, m);
  };
  if (target == "aten.addcmul.default") {  // self + value * t1 * t2, in the CPU kernel's order
    op("v", "aten.add.Tensor", arg("self"),
       op("p", "aten.mul.Tensor", op("s", "aten.mul.Tensor", arg("tensor1"), arg("value")), arg("tensor2")));
    return true;
  }
  if (target == "aten.addcdiv.default") {  // self + value * t1 / t2
    op("v", "aten.add.Tensor", arg("self"),
       op("q", "aten.div.Tensor", op("s", "aten.mul.Tensor", arg("tensor1"), arg("value")), arg("tensor2")));
    return true;
  }
  if (target == "aten.lerp.Scalar") {
    // As the CPU kernel: self + w (end - self) for |w| < 0.5, else end - (end - self)(1 - w).
    const std::string w = arg("weight");
    char* rest = nullptr;
    const double weight = std::strtod(w.c_str(), &rest);
    if (rest == w.c_str()) return false;  // not a literal
    const std::string d = op("d", "aten.sub.Tensor", arg("end"), arg("self"));
    if (std::abs(weight) < 0.5)
      op("v", "aten.add.Tensor", arg("self"), op("wd", "aten.mul.Tensor", d, w));
    else
      op("v", "aten.sub.Tensor", arg("end"), op("wd", "aten.mul.Tensor", d, std::to_string(1.0 - weight)));
    return true;
  }
  if (activation_decomposition(b, target, args, dtype)) return true;
  if (target == "aten.masked_fill.Scalar" || target == "aten.masked_fill.Tensor") {  // where(mask, value, self)
    b.node("v", "aten.where.self", arg("mask") + "," + arg("value") + "," + arg("self"), m);
    return true;
  }
  const bool tanh = arg("approximate") == "\"tanh\"";
  if (!tanh && arg("approximate") != "\"none\"") return false;
  if (target == "aten.gelu.default") {
    const std::string x = arg("self");
    std::string inner;
    if (tanh) {  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      const std::string cube = op("x3", "aten.mul.Tensor", op("x2", "aten.mul.Tensor", x, x), x);
      const std::string sum = op("a", "aten.add.Tensor", x, op("c", "aten.mul.Tensor", cube, "0.044715"));
      inner = op("t", "aten.tanh.default", op("k", "aten.mul.Tensor", sum, "0.7978845608028654"));
    } else {  // 0.5 x (1 + erf(x / sqrt 2))
      inner = op("t", "aten.erf.default", op("k", "aten.mul.Tensor", x, "0.7071067811865476"));
    }
    op("v", "aten.mul.Tensor", op("h", "aten.mul.Tensor", x, "0.5"), op("p", "aten.add.Tensor", inner, "1.0"));
    return true;
  }
  if (target == "aten.gelu_backward.default") {
    const std::string g = arg("grad_output"), x = arg("self");
    std::string slope;
    if (tanh) {
      // d/dx of 0.5 x (1 + tanh(u)), u = k (x + c x^3): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3c x^2)
      const std::string x2 = op("x2", "aten.mul.Tensor", x, x);
      const std::string u = op("u", "aten.mul.Tensor",
                               op("a", "aten.add.Tensor", x, op("c", "aten.mul.Tensor", op("x3", "aten.mul.Tensor", x2, x), "0.044715")),
                               "0.7978845608028654");
      const std::string t = op("t", "aten.tanh.default", u);
      const std::string left = op("l", "aten.mul.Tensor", op("p", "aten.add.Tensor", t, "1.0"), "0.5");
      const std::string sech2 = op("s", "aten.add.Tensor", op("nt2", "aten.mul.Tensor", op("t2", "aten.mul.Tensor", t, t), "-1.0"), "1.0");
      const std::string du = op("du", "aten.mul.Tensor", op("q", "aten.add.Tensor", op("x2c", "aten.mul.Tensor", x2, "0.134145"), "1.0"),
                                "0.7978845608028654");
      const std::string right = op("r", "aten.mul.Tensor", op("hx", "aten.mul.Tensor", x, "0.5"),
                                   op("sd", "aten.mul.Tensor", sech2, du));
      slope = op("d", "aten.add.Tensor", left, right);
    } else {
      // cdf(x) + x pdf(x): 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)
      const std::string cdf = op("cdf", "aten.mul.Tensor",
                                 op("p", "aten.add.Tensor",
                                    op("e", "aten.erf.default", op("k", "aten.mul.Tensor", x, "0.7071067811865476")), "1.0"),
                                 "0.5");
      const std::string pdf = op("pdf", "aten.mul.Tensor",
                                 op("ex", "aten.exp.default", op("n", "aten.mul.Tensor", op("x2", "aten.mul.Tensor", x, x), "-0.5")),
                                 "0.3989422804014327");
      slope = op("d", "aten.add.Tensor", cdf, op("xp", "aten.mul.Tensor", x, pdf));
    }
    op("v", "aten.mul.Tensor", g, slope);
    return true;
  }
  return false;
}

bool reduction_decomposition(GraphWriter& b, const std::string& target,
                             const std::map<std::string, std::string>& args, at::ScalarType dtype) {
  const std::string full = b.meta(dtype, ValueShape::Full), row = b.meta(dtype, ValueShape::Row);
  auto arg = [&](const char* name) {
    auto it = args.find(name);
    return it == args.end() ? std::string("null") : it->second;
  };
  if (target == "aten.std.correction") {  // sqrt(var), var as the compiler lowers it
    b.node("v", "aten.sqrt.default",
           b.node_kw("var", "aten.var.correction", arg("self") + "," + b.dims,
                     "\"correction\":" + arg("correction") + ",\"keepdim\":true", row),
           row);
    return true;
  }
  if (target == "aten.logsumexp.default") {  // as the CPU: infinite maxima count as 0
    const std::string x = arg("self");
    const std::string m = b.node("m", "aten.amax.default", x + "," + b.dims + ",true", row);
    const std::string inf = b.node("inf", "aten.eq.Scalar", b.node("am", "aten.abs.default", m, row) + ",Infinity",
                                   b.meta(at::kBool, ValueShape::Row));
    const std::string mz = b.node("mz", "aten.where.self", inf + ",0.0," + m, row);
    const std::string e = b.node("e", "aten.exp.default", b.node("d", "aten.sub.Tensor", x + "," + mz, full), full);
    const std::string s = b.node("s", "aten.sum.dim_IntList", e + "," + b.dims + ",true", row);
    b.node("v", "aten.add.Tensor", b.node("l", "aten.log.default", s, row) + "," + mz, row);
    return true;
  }
  if (target != "aten.linalg_vector_norm.default") return false;
  const std::string ord_text = arg("ord");
  char* rest = nullptr;
  const double ord = std::strtod(ord_text.c_str(), &rest);
  if (rest == ord_text.c_str() && ord_text != "Infinity" && ord_text != "-Infinity") return false;
  const double p = ord_text == "Infinity" ? INFINITY : ord_text == "-Infinity" ? -INFINITY : ord;
  std::string x = arg("self");
  if (arg("dtype") != "null") x = b.node("x", "prims.convert_element_type.default", x + "," + arg("dtype"), full);
  auto reduce = [&](const std::string& name, const char* op, const std::string& v) {
    return b.node(name, op, v + "," + b.dims + ",true", row);
  };
  const std::string a = b.node("a", "aten.abs.default", x, full);
  if (p == 2) {
    b.node("v", "aten.sqrt.default", reduce("s", "aten.sum.dim_IntList", b.node("sq", "aten.mul.Tensor", x + "," + x, full)), row);
  } else if (p == 1) {
    reduce("v", "aten.sum.dim_IntList", a);
  } else if (std::isinf(p)) {
    reduce("v", p > 0 ? "aten.amax.default" : "aten.amin.default", a);
  } else {
    return false;  // 0 and fractional orders: the fallback
  }
  return true;
}

}  // namespace openneuron::integration
