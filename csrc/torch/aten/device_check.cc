#include "torch/aten/device_check.h"

#include <optional>
#include <c10/util/SmallVector.h>

#include <c10/util/Exception.h>

#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

struct TensorArg {
  const at::Tensor* tensor;
  const std::string* name;
};

bool accepted(const OpInfo& info, const at::Tensor& t, c10::Device common) {
  if (t.device() == common) return true;
  if (!t.device().is_cpu()) return false;
  if (info.accepts_cpu_tensors) return true;
  // CPU 0-dim tensors are scalars, accepted as TensorIterator does.
  return !info.exact_same_device && t.dim() == 0;
}

}  // namespace

c10::DeviceIndex check_devices(const OpInfo& info,
                               const c10::FunctionSchema& schema,
                               const torch::jit::Stack& stack) {
  const auto& args = schema.arguments();
  const size_t first = stack.size() - args.size();
  c10::SmallVector<TensorArg, 8> tensors;
  std::optional<c10::Device> common;
  std::optional<c10::DeviceIndex> device_arg;
  auto add = [&](const at::Tensor& t, const std::string& name) {
    if (!t.defined()) return;
    tensors.push_back({&t, &name});
    if (!common && t.device().type() == kNeuron) common = t.device();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& v = stack[first + i];
    const auto& name = args[i].name();
    if (v.isTensor()) {
      add(v.toTensor(), name);
    } else if (v.isList()) {
      for (const auto& e : v.toListRef())
        if (e.isTensor()) add(e.toTensor(), name);
    } else if (v.isDevice() && v.toDevice().type() == kNeuron) {
      device_arg = v.toDevice().has_index() ? v.toDevice().index() : -1;
    }
  }
  if (!common) return resolve_device_index(device_arg.value_or(-1));
  for (const auto& [t, name] : tensors) {
    TORCH_CHECK(accepted(info, *t, *common),
                "Expected all tensors to be on the same device, but got ",
                *name, " is on ", t->device(),
                ", different from other tensors on ", *common,
                " (when checking argument '", *name, "' of ", info.name, ")");
  }
  return common->index();
}

}  // namespace openneuron::integration
