#include "torch/aten/eager/foreach.h"

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace openneuron::integration {
namespace {

// The type a foreach argument has per tensor: Tensor[] -> Tensor, Scalar[] -> Scalar.
std::string element_type(const c10::Argument& a) {
  std::string t = a.real_type()->str();
  if (t == "Tensor[]" || t == "Scalar[]") t.resize(t.size() - 2);
  return t;
}

// The per-tensor op of a foreach op: its name without "_foreach_", the
// overload whose leading arguments have the element types (the rest have
// defaults). _foreach_norm.Scalar is linalg_vector_norm's (ord, dim=None,
// keepdim=False, dtype).
std::optional<c10::OperatorHandle> element_op(const c10::FunctionSchema& schema) {
  const std::string base = schema.name().substr(std::string("aten::_foreach_").size());
  if (base == "norm") return c10::Dispatcher::singleton().findSchema({"aten::linalg_vector_norm", ""});
  const auto& fargs = schema.arguments();
  for (const char* overload : {"Scalar", "Tensor", ""}) {
    auto op = c10::Dispatcher::singleton().findSchema({"aten::" + base, overload});
    if (!op) continue;
    const auto& eargs = op->schema().arguments();
    if (eargs.size() < fargs.size() || op->schema().returns().size() > 1) continue;
    bool match = true;
    for (size_t i = 0; i < eargs.size() && match; ++i)
      match = i < fargs.size() ? element_type(fargs[i]) == eargs[i].real_type()->str()
                               : eargs[i].default_value().has_value();
    if (match) return op;
  }
  return std::nullopt;
}

const std::optional<c10::OperatorHandle>& element_op_cached(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static auto* ops = new std::unordered_map<const void*, std::optional<c10::OperatorHandle>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = ops->find(&op.schema());
  if (it == ops->end()) it = ops->emplace(&op.schema(), element_op(op.schema())).first;
  return it->second;
}

}  // namespace

bool run_foreach_per_tensor(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (op.schema().name().rfind("aten::_foreach_", 0) != 0) return false;
  const auto& element = element_op_cached(op);
  if (!element) return false;
  const auto& fargs = op.schema().arguments();
  const auto& eargs = element->schema().arguments();
  const bool norm = element->schema().name() == "aten::linalg_vector_norm";
  const size_t n = fargs.size();
  std::vector<c10::IValue> args(stack->end() - n, stack->end());
  size_t count = 0;
  for (size_t j = 0; j < n; ++j)
    if (args[j].isTensorList() || args[j].isList()) count = args[j].toListRef().size();
  for (size_t j = 0; j < n; ++j)  // lists of one length, as PyTorch checks
    if ((args[j].isTensorList() || args[j].isList()) && args[j].toListRef().size() != count) return false;
  const bool returns_list = op.schema().returns().size() == 1;
  c10::List<at::Tensor> results;
  for (size_t i = 0; i < count; ++i) {
    torch::jit::Stack s;
    for (size_t j = 0; j < n; ++j) {
      const c10::IValue& v = args[j];
      s.push_back(v.isTensorList() || v.isList() ? v.toListRef()[i] : v);
      if (norm && j == 1) {  // linalg_vector_norm(x, ord, dim=None, keepdim=False, dtype)
        s.emplace_back();
        s.emplace_back(false);
      }
    }
    for (size_t j = s.size(); j < eargs.size(); ++j) s.push_back(*eargs[j].default_value());
    element->callBoxed(&s);
    if (returns_list) results.push_back(s.back().toTensor());
  }
  torch::jit::drop(*stack, n);
  if (returns_list) stack->emplace_back(std::move(results));
  return true;
}

}  // namespace openneuron::integration
