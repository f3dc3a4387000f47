#include "torch/aten/eager/decomposition_fallback.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "torch/aten/eager/eager_kernel.h"
#include "torch/runtime/settings.h"

namespace py = pybind11;

namespace openneuron::integration {
namespace {

thread_local std::vector<const c10::FunctionSchema*> t_decomposing;

std::string full_name(const c10::FunctionSchema& schema) {
  return schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
}

// The Python side (GIL held).
py::object decompositions() {
  static auto* module = new py::object(py::module::import("openneuron._eager_decompositions"));
  return *module;
}

std::mutex g_known_mutex;
std::unordered_map<const c10::FunctionSchema*, bool>& known() {
  static auto* map = new std::unordered_map<const c10::FunctionSchema*, bool>();
  return *map;
}

// What is known of the op's decomposition: true/false, or nullopt (not
// asked yet; asking needs the GIL).
std::optional<bool> known_decomposition(const c10::FunctionSchema& schema) {
  std::lock_guard<std::mutex> lock(g_known_mutex);
  auto it = known().find(&schema);
  if (it == known().end()) return std::nullopt;
  return it->second;
}

// Asks the Python side once per op (GIL held).
bool ask_decomposition(const c10::FunctionSchema& schema) {
  bool has = false;
  try {
    has = decompositions().attr("has_decomposition")(full_name(schema)).cast<bool>();
  } catch (const py::error_already_set&) {
    has = false;
  }
  std::lock_guard<std::mutex> lock(g_known_mutex);
  known()[&schema] = has;
  return has;
}

}  // namespace

bool run_decomposition(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  if (!settings().eager_decompositions || !Py_IsInitialized() ||
      std::find(t_decomposing.begin(), t_decomposing.end(), &schema) != t_decomposing.end())
    return false;
  // Functional ops only: the decompositions of in-place and out= forms do
  // not check their output as the op does (a broadcast self, a resize).
  for (const auto& arg : schema.arguments()) {
    if (arg.type()->str().find("Generator") != std::string::npos) return false;
    if (arg.alias_info() && arg.alias_info()->isWrite()) return false;
  }
  // Ops known to have none never take the GIL.
  if (known_decomposition(schema) == std::optional<bool>(false)) return false;
  py::gil_scoped_acquire gil;
  if (!known_decomposition(schema).value_or(false) && !ask_decomposition(schema)) return false;
  const size_t n = schema.arguments().size();
  py::tuple args(n);
  for (size_t i = 0; i < n; ++i) args[i] = torch::jit::toPyObject((*stack)[stack->size() - n + i]);
  // The decomposition's ops are the op's own work: dispatch modes see the op.
  c10::impl::ExcludeDispatchKeyGuard no_python(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  t_decomposing.push_back(&schema);
  py::object result;
  try {
    result = decompositions().attr("decompose")(full_name(schema), args);
  } catch (const py::error_already_set&) {
    t_decomposing.pop_back();
    return false;
  }
  t_decomposing.pop_back();
  if (result.is(py::reinterpret_borrow<py::object>(Py_NotImplemented))) return false;  // not for these arguments
  const auto& returns = schema.returns();
  std::vector<c10::IValue> outs;
  if (returns.size() == 1) {
    outs.push_back(torch::jit::toIValue(result, returns[0].real_type()));
  } else if (!returns.empty()) {
    py::tuple items = result.cast<py::tuple>();
    TORCH_CHECK(items.size() == returns.size(), "the decomposition of ", full_name(schema), " returned ",
                items.size(), " values, expected ", returns.size());
    for (size_t i = 0; i < returns.size(); ++i) outs.push_back(torch::jit::toIValue(items[i], returns[i].real_type()));
  }
  // A result the op owns must not be a view of an argument (as it may be
  // from a decomposition that returns its input for a no-op).
  for (size_t r = 0; r < outs.size(); ++r) {
    if (!outs[r].isTensor() || returns[r].alias_info()) continue;
    const at::Tensor& t = outs[r].toTensor();
    for (size_t i = 0; t.defined() && i < n; ++i) {
      const c10::IValue& a = (*stack)[stack->size() - n + i];
      if (a.isTensor() && a.toTensor().defined() && t.is_alias_of(a.toTensor())) {
        outs[r] = t.clone();
        break;
      }
    }
  }
  torch::jit::drop(*stack, n);
  for (auto& v : outs) stack->push_back(std::move(v));
  record_decomposition(full_name(schema));
  return true;
}

}  // namespace openneuron::integration
