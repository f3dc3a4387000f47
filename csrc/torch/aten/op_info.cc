#include "torch/aten/op_info.h"

#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "torch/runtime/fast_tls.h"
#include "torch/runtime/settings.h"

namespace openneuron::integration {
namespace {

const std::unordered_set<std::string_view>& no_device_check_ops() {
  static const std::unordered_set<std::string_view> ops = {
#include "device_check_table.inc"
  };
  return ops;
}

bool starts_with_any(std::string_view name,
                     std::initializer_list<std::string_view> prefixes) {
  for (auto prefix : prefixes)
    if (name.substr(0, prefix.size()) == prefix) return true;
  return false;
}

// `name` is one of `ops` (schema names, any overload): "aten::t_" is t_,
// not t_copy.
bool is_any_of(std::string_view name, std::initializer_list<std::string_view> ops) {
  for (auto op : ops)
    if (name.substr(0, op.size()) == op && (name.size() == op.size() || name[op.size()] == '.'))
      return true;
  return false;
}

// Ops that, like on CUDA, take CPU index or source tensors next to device ones.
bool takes_cpu_tensors(std::string_view name) {
  return starts_with_any(
      name, {"aten::index.", "aten::index_put", "aten::_index_put_impl_",
             "aten::copy_", "aten::_copy_from", "aten::_to_copy",
             "aten::_unsafe_index"});
}

// Ops that manage memory or metadata and move no data always run natively:
// the CPU-fallback path itself uses them to write results back, and those
// that compare storage layouts (forward AD's tangent checks) would see the
// compact CPU copies instead of the real storages.
bool never_falls_back(std::string_view name) {
  return starts_with_any(
      name, {"aten::resize", "aten::set_", "aten::as_strided",
             "aten::_copy_from", "aten::copy_", "aten::empty",
             "aten::_local_scalar_dense", "aten::record_stream",
             "aten::_has_same_storage_numel", "aten::is_same_size",
             "aten::is_set_to", "aten::_new_zeros_with_same_feature_meta"});
}

bool aliases_without_writing(const c10::AliasInfo* alias) {
  if (!alias) return false;
  if (!alias->isWrite() && !alias->beforeSets().empty()) return true;
  for (const auto& inner : alias->containedTypes())  // Tensor(a)[]
    if (aliases_without_writing(&inner)) return true;
  return false;
}

// Views by schema; the "unsafe" views whose schema does not say so (kron's
// out= writes through an _unsafe_view of its output); and the in-place view
// ops, which change their argument's metadata, not its data.
bool returns_view(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns())
    if (aliases_without_writing(r.alias_info())) return true;
  // In-place view ops and view-like ops without alias annotations.
  return is_any_of(
      schema.name(),
      {"aten::_unsafe_view", "aten::unsafe_split", "aten::unsafe_chunk",
       "aten::transpose_", "aten::t_", "aten::squeeze_", "aten::unsqueeze_",
       "aten::swapdims_", "aten::swapaxes_", "aten::detach_",
       "aten::as_strided_"});
}

// Ops whose result's size (or a host value) depends on device values, so
// that running them waits for the device, as on CUDA.
OpInfo::HostSync host_sync(const c10::FunctionSchema& schema) {
  const std::string& name = schema.name();
  if (is_any_of(name, {"aten::nonzero", "aten::masked_select", "aten::_unique", "aten::_unique2",
                       "aten::unique_dim", "aten::unique_consecutive", "aten::unique_dim_consecutive",
                       "aten::bincount", "aten::equal", "aten::is_nonzero"}))
    return OpInfo::HostSync::Always;
  if (name == "aten::repeat_interleave" && schema.overload_name() != "self_int") return OpInfo::HostSync::Always;
  if (is_any_of(name, {"aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"}))
    return OpInfo::HostSync::WithMaskIndex;  // a boolean index is a nonzero
  return OpInfo::HostSync::Never;
}

OpInfo make_op_info(const c10::OperatorHandle& op) {
  OpInfo info;
  info.name = c10::toString(op.operator_name());
  const auto& schema = op.schema();
  info.exact_same_device = !no_device_check_ops().count(info.name);
  // Composite-only ops have no device check of their own on CUDA either
  // (resize_as_ takes a template on any device); their inner ops check.
  info.accepts_cpu_tensors =
      takes_cpu_tensors(info.name) ||
      !op.hasKernelForDispatchKey(c10::DispatchKey::CPU);
  info.has_mutable_args = schema.is_mutable();
  info.is_view = returns_view(schema);
  info.force_cpu_fallback = !never_falls_back(info.name) && !info.is_view &&
                            settings().forces_cpu_fallback(info.name);
  info.settings_generation = settings_generation();
  info.host_sync = host_sync(schema);
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].type()->str().find("Generator") != std::string::npos)
      info.generator_args.push_back(i);
  }
  // (randperm.out draws with no generator argument: the tag says it)
  info.draws_random = !info.generator_args.empty() || info.name == "aten::native_dropout" ||
                      op.hasTag(at::Tag::nondeterministic_seeded);
  return info;
}

}  // namespace

const OpInfo& op_info(const c10::OperatorHandle& op) {
  using Cache = std::unordered_map<const void*, std::unique_ptr<OpInfo>>;
  OPENNEURON_FAST_TLS static thread_local Cache* cache = nullptr;
  if (C10_UNLIKELY(cache == nullptr)) {
    static thread_local std::unique_ptr<Cache> owner;  // freed at thread exit
    owner = std::make_unique<Cache>();
    cache = owner.get();
  }
  auto& slot = (*cache)[&op.schema()];
  if (!slot || slot->settings_generation != settings_generation())
    slot = std::make_unique<OpInfo>(make_op_info(op));
  return *slot;
}

}  // namespace openneuron::integration
