#include "torch/distributed/host_alias.h"

#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include "torch/aten/device_staging.h"
#include "torch/aten/router.h"
#include "torch/runtime/device.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {
namespace {

void release_storage(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

thread_local std::vector<std::pair<at::Tensor, at::Tensor>> staged;

}  // namespace

std::vector<std::pair<at::Tensor, at::Tensor>> take_staged() { return std::exchange(staged, {}); }

at::Tensor host_alias(const at::Tensor& t, const char* collective) {
  if (t.defined() && t.device().is_cpu()) return t;  // Gloo takes it as is
  TORCH_CHECK(t.defined() && t.device().type() == kNeuron, "neuron backend ",
              collective, ": expected neuron or CPU tensors, got a tensor on ",
              t.defined() ? c10::str(t.device()) : std::string("no device"));
  wait_current_stream(t.device().index());
  if (!host_addressable()) {
    at::Tensor copy = download(t);
    staged.emplace_back(t, copy);
    return copy;
  }
  const auto& storage = t.storage();
  c10::DataPtr data(storage.mutable_data(), new c10::Storage(storage),
                    &release_storage, c10::Device(c10::kCPU));
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(c10::make_intrusive<c10::StorageImpl>(
          c10::StorageImpl::use_byte_size_t(), storage.nbytes(),
          std::move(data), /*allocator=*/nullptr, /*resizable=*/false)),
      c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
}

std::vector<at::Tensor> host_aliases(const std::vector<at::Tensor>& tensors,
                                     const char* collective) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(host_alias(t, collective));
  return out;
}

std::vector<std::vector<at::Tensor>> host_aliases(
    const std::vector<std::vector<at::Tensor>>& lists,
    const char* collective) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(lists.size());
  for (const auto& list : lists) out.push_back(host_aliases(list, collective));
  return out;
}

}  // namespace openneuron::integration
