#include "compiler/ir/view_coords.h"

#include "compiler/ir/errors.h"

namespace openneuron::compiler {
namespace {

std::vector<Expr> flat_reshape_coords(const std::vector<Expr>& in_shape, const std::vector<Expr>& out_shape,
                                      const std::vector<Expr>& c) {
  std::vector<Expr> ic(in_shape.size(), Expr(0));
  auto out_strides = contiguous_strides(out_shape);
  Expr flat(0);
  for (size_t i = 0; i < c.size(); ++i) flat = flat + c[i] * out_strides[i];
  auto in_strides = contiguous_strides(in_shape);
  for (size_t j = 0; j < in_shape.size(); ++j) {
    Expr q = Expr::floordiv(flat, in_strides[j]);
    ic[j] = j == 0 ? q : Expr::mod(q, in_shape[j]);
  }
  return ic;
}

}  // namespace

std::vector<Expr> reshape_coords(const std::vector<Expr>& in_shape, const std::vector<Expr>& out_shape,
                                 const std::vector<Expr>& c) {
  std::vector<Expr> ic(in_shape.size(), Expr(0));
  // Match groups of dims whose sizes multiply to the same value
  // (as PyTorch's view does), and go through a flat index only within a
  // group, so a merge of outer dims costs no division in the inner loop.
  std::vector<int> ai, bi;  // non-1 dim positions
  for (size_t i = 0; i < in_shape.size(); ++i) if (!in_shape[i].equals(1)) ai.push_back(i);
  for (size_t i = 0; i < out_shape.size(); ++i) if (!out_shape[i].equals(1)) bi.push_back(i);
  size_t i = 0, j = 0;
  while (i < ai.size() && j < bi.size()) {
    std::vector<int> ga = {ai[i++]}, gb = {bi[j++]};
    Expr pa = in_shape[ga[0]], pb = out_shape[gb[0]];
    while (pa != pb) {
      bool extend_out;
      if (pa.is_const() && pb.is_const()) extend_out = pb.value() < pa.value();
      else extend_out = (Expr::floordiv(pa, pb) * pb) == pa;
      if (extend_out && j < bi.size()) { gb.push_back(bi[j]); pb = pb * out_shape[bi[j++]]; }
      else if (i < ai.size()) { ga.push_back(ai[i]); pa = pa * in_shape[ai[i++]]; }
      else if (j < bi.size()) { gb.push_back(bi[j]); pb = pb * out_shape[bi[j++]]; }
      else return flat_reshape_coords(in_shape, out_shape, c);
    }
    Expr flat(0), stride(1);
    for (auto it = gb.rbegin(); it != gb.rend(); ++it) { flat = flat + c[*it] * stride; stride = stride * out_shape[*it]; }
    Expr inner(1);
    for (auto it = ga.rbegin(); it != ga.rend(); ++it) {
      Expr q = Expr::floordiv(flat, inner);
      ic[*it] = it + 1 == ga.rend() ? q : Expr::mod(q, in_shape[*it]);
      inner = inner * in_shape[*it];
    }
  }
  if (i != ai.size() || j != bi.size()) return flat_reshape_coords(in_shape, out_shape, c);
  return ic;
}

std::vector<Expr> view_input_coords(const Node* v, const std::vector<Expr>& c) {
  const Node* in = v->inputs[0];
  std::vector<Expr> ic(in->shape.size(), Expr(0));
  if (v->op == "expand") {
    size_t lead = v->shape.size() - in->shape.size();
    for (size_t i = 0; i < in->shape.size(); ++i) ic[i] = in->shape[i].equals(1) ? Expr(0) : c[lead + i];
  } else if (v->op == "permute") {
    for (size_t i = 0; i < v->dims.size(); ++i) ic[v->dims[i]] = c[i];
  } else if (v->op == "slice") {
    int64_t d = v->view_args[0].value();
    ic = c;
    ic[d] = v->view_args[1] + c[d] * v->view_args[2];
  } else if (v->op == "select") {
    int64_t d = v->view_args[0].value();
    size_t k = 0;
    for (size_t i = 0; i < ic.size(); ++i) ic[i] = static_cast<int64_t>(i) == d ? v->view_args[1] : c[k++];
  } else if (v->op == "reshape") {
    ic = reshape_coords(in->shape, v->shape, c);
  } else {
    throw CompileError("view " + v->op + " is not a coordinate map");
  }
  return ic;
}

}  // namespace openneuron::compiler
