// Tensor.record_stream(stream): the caching allocator will not hand the
// tensor's memory to another stream until `stream` finished its queued work.
#include <torch/library.h>

#include "torch/runtime/device.h"
#include "torch/runtime/device_allocator.h"

namespace openneuron::integration {
namespace {

void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNeuron,
              "record_stream: expected a neuron stream, got a stream of ",
              stream.device());
  device_allocator().recordStream(self.storage().data_ptr(), stream);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", TORCH_FN(record_stream));
}

}  // namespace
}  // namespace openneuron::integration
