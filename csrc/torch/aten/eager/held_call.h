// An eager call held back for fusion (eager_fusion.h), and the identity of
// the tensors it touches.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <vector>

#include "torch/aten/eager/eager_op.h"

namespace openneuron::integration {

// A tensor's memory and how it is seen: two tensors with equal keys are one
// value to a fused kernel (the same elements, in the same order).
struct TensorKey {
  const void* storage = nullptr;
  int64_t offset = 0;
  c10::SmallVector<int64_t, 5> sizes, strides;
  at::ScalarType dtype = at::kFloat;
  bool operator==(const TensorKey& o) const {
    return storage == o.storage && offset == o.offset && dtype == o.dtype && sizes == o.sizes &&
           strides == o.strides;
  }
};

inline TensorKey key_of(const at::Tensor& t) {
  TensorKey k;
  k.storage = t.storage().unsafeGetStorageImpl();
  k.offset = t.storage_offset();
  k.sizes.assign(t.sizes().begin(), t.sizes().end());
  k.strides.assign(t.strides().begin(), t.strides().end());
  k.dtype = t.scalar_type();
  return k;
}

struct HeldCall {
  const EagerOp* op = nullptr;
  const c10::FunctionSchema* schema = nullptr;
  std::vector<c10::IValue> args;  // the call's arguments
  at::Tensor out;                 // its result (held calls are pointwise: one)
  bool store = true;              // its result must reach memory (seen after the chain)
};

}  // namespace openneuron::integration
