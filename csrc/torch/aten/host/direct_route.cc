#include "torch/aten/host/direct_route.h"

#include "torch/aten/eager/eager_fusion.h"
#include "torch/aten/eager/eager_op.h"
#include "torch/aten/op_info.h"
#include "torch/runtime/settings.h"

namespace openneuron::integration {

DirectOpFacts& direct_op_facts(const char* name, const char* overload,
                               DirectOpFacts& facts) {
  const int generation = settings_generation();
  if (C10_LIKELY(facts.generation.load(std::memory_order_acquire) ==
                 generation))
    return facts;
  std::call_once(facts.found, [&] {
    facts.op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  });
  const auto& info = op_info(*facts.op);
  // With eager fusion, a pointwise op or a reduction takes the boxed
  // router, which may hold it for fusion (eager_fusion.h).
  const EagerOp::Family family = eager_op(*facts.op).family;
  const bool fusable = eager_fusion_enabled() && settings().eager_kernels &&
                       (family == EagerOp::Family::Pointwise || family == EagerOp::Family::Reduction);
  const bool host_kernel = host_addressable() && !info.force_cpu_fallback;
  facts.direct.store(host_kernel && !fusable, std::memory_order_relaxed);
  facts.direct_when_small.store(host_kernel && fusable, std::memory_order_relaxed);
  facts.accepts_cpu_scalars.store(!info.exact_same_device,
                                  std::memory_order_relaxed);
  facts.has_mutable_args.store(info.has_mutable_args,
                               std::memory_order_relaxed);
  facts.generation.store(generation, std::memory_order_release);
  return facts;
}

}  // namespace openneuron::integration
