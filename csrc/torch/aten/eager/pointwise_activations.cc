// Activations and their backwards, and other pointwise ops, written with
// the ops the compiler lowers, as PyTorch's CPU kernels compute them (the
// same branches; values within the op's tolerance, not bitwise).
#include <cmath>
#include <limits>

#include "torch/aten/eager/decompositions.h"

namespace openneuron::integration {
namespace {

// The largest finite value of a floating dtype (nan_to_num's default).
double largest(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return 65504.0;
    case at::kBFloat16: return 3.3895313892515355e38;
    case at::kFloat: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

}  // namespace

bool activation_decomposition(GraphWriter& b, const std::string& target,
                              const std::map<std::string, std::string>& args, at::ScalarType dtype) {
  const std::string m = b.meta(dtype, ValueShape::Full), mb = b.meta(at::kBool, ValueShape::Full);
  auto arg = [&](const char* name) {
    auto it = args.find(name);
    return it == args.end() || it->second == "null" ? std::string() : it->second;
  };
  auto op = [&](const std::string& name, const char* t, const std::string& x, const std::string& y = "") {
    return b.node(name, t, y.empty() ? x : x + "," + y, m);
  };
  auto test = [&](const std::string& name, const char* t, const std::string& x, const std::string& y) {
    return b.node(name, t, x + "," + y, mb);
  };
  auto one_minus = [&](const std::string& name, const std::string& y) {
    return op(name, "aten.add.Tensor", op(name + "n", "aten.neg.default", y), "1.0");
  };
  auto where = [&](const std::string& name, const std::string& c, const std::string& x, const std::string& y) {
    return b.node(name, "aten.where.self", c + "," + x + "," + y, m);
  };
  const std::string x = arg("self"), g = arg("grad_output");

  if (target == "aten.silu.default") {  // x sigmoid(x)
    op("v", "aten.mul.Tensor", x, op("s", "aten.sigmoid.default", x));
  } else if (target == "aten.silu_backward.default") {  // g s (1 + x (1 - s))
    const std::string s = op("s", "aten.sigmoid.default", x);
    const std::string oms = one_minus("oms", s);
    const std::string inner = op("in", "aten.add.Tensor", op("xo", "aten.mul.Tensor", x, oms), "1.0");
    op("v", "aten.mul.Tensor", op("gs", "aten.mul.Tensor", g, s), inner);
  } else if (target == "aten.sigmoid_backward.default") {  // g (1 - y) y
    const std::string y = arg("output");
    op("v", "aten.mul.Tensor", op("gy", "aten.mul.Tensor", g, one_minus("omy", y)), y);
  } else if (target == "aten.tanh_backward.default") {  // g (1 - y^2)
    const std::string y = arg("output");
    op("v", "aten.mul.Tensor", g, one_minus("omy", op("y2", "aten.mul.Tensor", y, y)));
  } else if (target == "aten.threshold_backward.default") {  // x <= threshold: 0
    where("v", test("c", "aten.le.Scalar", x, arg("threshold")), "0", g);
  } else if (target == "aten.threshold.default") {
    where("v", test("c", "aten.le.Scalar", x, arg("threshold")), arg("value"), x);
  } else if (target == "aten.hardtanh.default") {
    op("v", "aten.clamp.default", x, arg("min_val") + "," + arg("max_val"));
  } else if (target == "aten.hardtanh_backward.default") {
    const std::string out = b.node("c", "aten.logical_or.default",
                                   test("lo", "aten.le.Scalar", x, arg("min_val")) + "," +
                                       test("hi", "aten.ge.Scalar", x, arg("max_val")),
                                   mb);
    where("v", out, "0", g);
  } else if (target == "aten.leaky_relu.default") {
    where("v", test("c", "aten.gt.Scalar", x, "0"), x, op("n", "aten.mul.Tensor", x, arg("negative_slope")));
  } else if (target == "aten.leaky_relu_backward.default") {
    where("v", test("c", "aten.gt.Scalar", x, "0"), g, op("n", "aten.mul.Tensor", g, arg("negative_slope")));
  } else if (target == "aten.elu.default") {
    // x > 0: scale x; else alpha scale (exp(input_scale x) - 1)
    const std::string neg = op("n", "aten.mul.Tensor",
                               op("e", "aten.expm1.default", op("xi", "aten.mul.Tensor", x, arg("input_scale"))),
                               op("as", "aten.mul.Tensor", arg("alpha"), arg("scale")));
    where("v", test("c", "aten.gt.Scalar", x, "0"), op("p", "aten.mul.Tensor", x, arg("scale")), neg);
  } else if (target == "aten.elu_backward.default") {
    const std::string y = arg("self_or_result"), a = arg("alpha"), s = arg("scale"), i = arg("input_scale");
    const std::string pos = op("p", "aten.mul.Tensor", g, s);
    std::string neg;
    if (arg("is_result") == "true") {  // g input_scale (y + alpha scale)
      neg = op("n", "aten.mul.Tensor", op("gi", "aten.mul.Tensor", g, i),
               op("ya", "aten.add.Tensor", y, op("as", "aten.mul.Tensor", a, s)));
    } else {  // g input_scale alpha scale exp(input_scale x)
      neg = op("n", "aten.mul.Tensor", op("gi", "aten.mul.Tensor", g, op("ias", "aten.mul.Tensor", i,
                                                                           op("as", "aten.mul.Tensor", a, s))),
               op("e", "aten.exp.default", op("xi", "aten.mul.Tensor", y, i)));
    }
    where("v", test("c", "aten.le.Scalar", y, "0"), neg, pos);
  } else if (target == "aten.hardsigmoid.default") {  // min(max(x + 3, 0), 6) / 6
    op("v", "aten.div.Tensor", op("c", "aten.clamp.default", op("a", "aten.add.Tensor", x, "3.0"), "0.0,6.0"), "6.0");
  } else if (target == "aten.hardsigmoid_backward.default") {  // -3 < x < 3: g / 6
    const std::string in = b.node("c", "aten.logical_and.default",
                                  test("lo", "aten.gt.Scalar", x, "-3.0") + "," + test("hi", "aten.lt.Scalar", x, "3.0"), mb);
    where("v", in, op("g6", "aten.div.Tensor", g, "6.0"), "0");
  } else if (target == "aten.hardswish.default") {  // x min(max(x + 3, 0), 6) / 6
    op("v", "aten.div.Tensor",
       op("p", "aten.mul.Tensor", x, op("c", "aten.clamp.default", op("a", "aten.add.Tensor", x, "3.0"), "0.0,6.0")),
       "6.0");
  } else if (target == "aten.hardswish_backward.default") {  // x < -3: 0; x <= 3: g (x / 3 + 0.5); else g
    const std::string mid = op("mid", "aten.mul.Tensor", g,
                               op("k", "aten.add.Tensor", op("x3", "aten.div.Tensor", x, "3.0"), "0.5"));
    where("v", test("lo", "aten.lt.Scalar", x, "-3.0"), "0",
          where("w", test("hi", "aten.le.Scalar", x, "3.0"), mid, g));
  } else if (target == "aten.softplus.default") {  // x beta > threshold: x; else log1p(exp(x beta)) / beta
    const std::string xb = op("xb", "aten.mul.Tensor", x, arg("beta"));
    where("v", test("c", "aten.gt.Scalar", xb, arg("threshold")), x,
          op("s", "aten.div.Tensor", op("l", "aten.log1p.default", op("e", "aten.exp.default", xb)), arg("beta")));
  } else if (target == "aten.softplus_backward.default") {  // g z / (z + 1), z = exp(x beta)
    const std::string xb = op("xb", "aten.mul.Tensor", x, arg("beta"));
    const std::string z = op("z", "aten.exp.default", xb);
    where("v", test("c", "aten.gt.Scalar", xb, arg("threshold")), g,
          op("q", "aten.div.Tensor", op("gz", "aten.mul.Tensor", g, z), op("z1", "aten.add.Tensor", z, "1.0")));
  } else if (target == "aten.mish.default") {  // x tanh(softplus(x))
    const std::string sp = where("sp", test("c", "aten.gt.Scalar", x, "20.0"), x,
                                 op("l", "aten.log1p.default", op("e", "aten.exp.default", x)));
    op("v", "aten.mul.Tensor", x, op("t", "aten.tanh.default", sp));
  } else if (target == "aten.rsub.Tensor" || target == "aten.rsub.Scalar") {  // other - alpha self
    const std::string a = arg("alpha");
    const std::string s = a.empty() || a == "1" ? x : op("as", "aten.mul.Tensor", x, a);
    op("v", "aten.sub.Tensor", arg("other"), s);
  } else if (target == "aten.logaddexp.default" || target == "aten.logaddexp2.default") {
    // Equal infinities give themselves; else max + log1p(exp(-|a - b|)) (base 2 for logaddexp2).
    const bool two = target == "aten.logaddexp2.default";
    const std::string o = arg("other");
    const std::string mx = op("mx", "aten.maximum.default", x, o);
    const std::string d = op("d", "aten.neg.default", op("ad", "aten.abs.default", op("df", "aten.sub.Tensor", x, o)));
    const std::string tail = two ? op("t", "aten.div.Tensor", op("l", "aten.log1p.default", op("e", "aten.exp2.default", d)),
                                      "0.69314718055994531")
                                 : op("t", "aten.log1p.default", op("e", "aten.exp.default", d));
    const std::string same = b.node("c", "aten.logical_and.default",
                                    test("eq", "aten.eq.Tensor", x, o) + "," +
                                        test("inf", "aten.eq.Scalar", op("ax", "aten.abs.default", x), "Infinity"),
                                    mb);
    where("v", same, x, op("s", "aten.add.Tensor", mx, tail));
  } else if (target == "aten.xlogy.Tensor") {  // nan other: nan; self == 0: 0; else self log(other)
    const std::string o = arg("other");
    where("v", b.node("nn", "aten.isnan.default", o, mb), o,
          where("w", test("z", "aten.eq.Scalar", x, "0"), "0",
                op("p", "aten.mul.Tensor", x, op("l", "aten.log.default", o))));
  } else if (target == "aten.deg2rad.default") {
    op("v", "aten.mul.Tensor", x, json_number(M_PI / 180.0));
  } else if (target == "aten.rad2deg.default") {
    op("v", "aten.mul.Tensor", x, json_number(180.0 / M_PI));
  } else if (target == "aten.hypot.default") {
    const std::string o = arg("other");
    op("v", "aten.sqrt.default", op("s", "aten.add.Tensor", op("a2", "aten.mul.Tensor", x, x), op("b2", "aten.mul.Tensor", o, o)));
  } else if (target == "aten.fmax.default" || target == "aten.fmin.default") {  // a NaN loses
    const std::string o = arg("other");
    const std::string both = op("mm", target == "aten.fmax.default" ? "aten.maximum.default" : "aten.minimum.default", x, o);
    where("v", b.node("na", "aten.isnan.default", x, mb), o, where("w", b.node("nb", "aten.isnan.default", o, mb), x, both));
  } else if (target == "aten.heaviside.default") {  // x == 0: values; else x > 0
    where("v", test("z", "aten.eq.Scalar", x, "0"), arg("values"),
          where("w", test("p", "aten.gt.Scalar", x, "0"), "1", "0"));
  } else if (target == "aten.softshrink.default") {  // |x| <= l: 0; NaN stays NaN, as ATen's x * 0
    // (written as a test: GPU compilers may fold x * 0 to 0)
    const std::string l = arg("lambd");
    where("v", test("hi", "aten.gt.Scalar", x, l), op("s", "aten.sub.Tensor", x, l),
          where("w", test("lo", "aten.lt.Scalar", x, op("nl", "aten.neg.default", l)), op("a", "aten.add.Tensor", x, l),
                where("z", b.node("n", "aten.isnan.default", x, mb), x, "0")));
  } else if (target == "aten.hardshrink.default" || target == "aten.softshrink_backward.default" ||
             target == "aten.hardshrink_backward.default") {  // -l <= x <= l: 0
    const std::string l = arg("lambd");
    const bool backward = target != "aten.hardshrink.default";
    const std::string in = b.node("c", "aten.logical_and.default",
                                  test("lo", "aten.ge.Scalar", x, op("nl", "aten.neg.default", l)) + "," +
                                      test("hi", "aten.le.Scalar", x, l),
                                  mb);
    const std::string grad = target == "aten.softshrink_backward.default" ? g : arg("grad_out");
    where("v", in, "0", backward ? grad : x);
  } else if (target == "aten.sinc.default") {  // x == 0: 1; else sin(pi x) / (pi x)
    const std::string px = op("px", "aten.mul.Tensor", x, json_number(M_PI));
    where("v", test("z", "aten.eq.Scalar", x, "0"), "1.0", op("q", "aten.div.Tensor", op("s", "aten.sin.default", px), px));
  } else if (target == "aten.logit.default") {  // log(z / (1 - z)), z clamped to [eps, 1 - eps]
    std::string z = x;
    if (!arg("eps").empty()) {
      const double eps = std::stod(arg("eps"));
      z = op("z", "aten.clamp.default", x, json_number(eps) + "," + json_number(1.0 - eps));
    }
    op("v", "aten.log.default", op("q", "aten.div.Tensor", z, one_minus("omz", z)));
  } else if (target == "aten.nan_to_num.default") {
    const std::string nan = arg("nan").empty() ? "0.0" : arg("nan");
    const std::string pos = arg("posinf").empty() ? json_number(largest(dtype)) : arg("posinf");
    const std::string neg = arg("neginf").empty() ? json_number(-largest(dtype)) : arg("neginf");
    where("v", b.node("n", "aten.isnan.default", x, mb), nan,
          where("p", test("pi", "aten.eq.Scalar", x, "Infinity"), pos,
                where("q", test("ni", "aten.eq.Scalar", x, "-Infinity"), neg, x)));
  } else if (target == "aten.isinf.default") {  // m is the result's (Bool): no abs(x) node in it
    b.node("v", "aten.logical_or.default",
           test("pi", "aten.eq.Scalar", x, "Infinity") + "," + test("ni", "aten.eq.Scalar", x, "-Infinity"), m);
  } else if (target == "aten.isposinf.default" || target == "aten.isneginf.default") {
    b.node("v", "aten.eq.Scalar", x + (target == "aten.isposinf.default" ? ",Infinity" : ",-Infinity"), m);
  } else if (target == "aten.lerp.Tensor") {  // |w| < 0.5: self + w d; else end - d (1 - w)
    const std::string w = arg("weight"), e = arg("end");
    const std::string d = op("d", "aten.sub.Tensor", e, x);
    const std::string small = test("sm", "aten.lt.Scalar", op("aw", "aten.abs.default", w), "0.5");
    where("v", small, op("a", "aten.add.Tensor", x, op("wd", "aten.mul.Tensor", w, d)),
          op("b", "aten.sub.Tensor", e, op("dw", "aten.mul.Tensor", d, one_minus("omw", w))));
  } else {
    return false;
  }
  return true;
}

}  // namespace openneuron::integration
