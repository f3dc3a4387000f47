#include "torch/aten/eager/held_call_on_host.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "torch/aten/router.h"

namespace openneuron::integration {
namespace {

// Whether `out` is `functional` with its result as a trailing out= argument.
bool is_out_form_of(const c10::FunctionSchema& out, const c10::FunctionSchema& functional) {
  const auto& a = functional.arguments();
  const auto& b = out.arguments();
  if (functional.returns().size() != 1 || b.size() != a.size() + 1 || !b.back().is_out()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name() != b[i].name() || *a[i].type() != *b[i].type()) return false;
  return true;
}

// The out= overload of a functional op, found by ATen's naming ("out",
// "<overload>_out", "Tensor_mode" -> "out_mode", "dim_IntList" ->
// "IntList_out", a backward op's "grad_input") and checked against its
// schema.
std::optional<c10::OperatorHandle> out_overload(const c10::FunctionSchema& functional) {
  const std::string& overload = functional.overload_name();
  std::vector<std::string> names = {overload.empty() ? "out" : overload + "_out", "out", "grad_input"};
  if (const size_t cut = overload.find('_'); cut != std::string::npos) {
    names.push_back("out" + overload.substr(cut));
    names.push_back(overload.substr(cut + 1) + "_out");
  }
  for (const auto& name : names)
    if (auto op = c10::Dispatcher::singleton().findOp({functional.name(), name}))
      if (is_out_form_of(op->schema(), functional)) return op;
  return std::nullopt;
}

// The op that runs a call of `schema` on the CPU, found once per schema.
std::optional<c10::OperatorHandle> host_op(const c10::FunctionSchema& schema, const EagerOp& e) {
  static std::mutex mutex;
  static auto* found = new std::unordered_map<const c10::FunctionSchema*, std::optional<c10::OperatorHandle>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = found->find(&schema);
  if (it != found->end()) return it->second;
  std::optional<c10::OperatorHandle> op;
  if (e.form == EagerOp::Form::InPlace)
    op = c10::Dispatcher::singleton().findOp({schema.name(), schema.overload_name()});
  else if (e.form == EagerOp::Form::Functional)
    op = out_overload(schema);
  return found->emplace(&schema, op).first->second;
}

}  // namespace

bool runs_held_calls_on_host(const c10::FunctionSchema& schema, const EagerOp& e) {
  return host_addressable() && host_op(schema, e).has_value();
}

bool run_held_call_on_host(const HeldCall& call, c10::DeviceIndex device) {
  if (!host_addressable()) return false;
  const auto op = host_op(*call.schema, *call.op);
  if (!op) return false;
  torch::jit::Stack stack(call.args.begin(), call.args.end());
  if (call.op->form == EagerOp::Form::Functional) stack.emplace_back(call.out);
  run_on_host(*op, device, &stack);
  return true;
}

}  // namespace openneuron::integration
