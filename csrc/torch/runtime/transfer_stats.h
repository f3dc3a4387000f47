// Counts every host<->device transfer by direction and cause, so a test or a
// user can prove that an op moved no data (torch.neuron.transfer_stats()).
#pragma once

#include <cstddef>
#include <cstdint>

namespace openneuron::integration {

enum class Direction { HostToDevice = 0, DeviceToHost = 1, DeviceToDevice = 2 };
constexpr int kNumDirections = 3;

enum class Cause {
  Copy = 0,         // an explicit copy: .to(), copy_(), .cpu(), .item() ...
  CpuFallback = 1,  // arguments and results of an op run on the CPU
  KernelOutput = 2, // a host kernel produced an output outside device memory
};
constexpr int kNumCauses = 3;

const char* to_string(Direction d);
const char* to_string(Cause c);

struct TransferCount {
  int64_t count = 0;
  int64_t bytes = 0;
};

void record_transfer(Direction direction, size_t bytes);
Cause current_transfer_cause();  // this thread's
TransferCount transfer_count(Direction direction, Cause cause);
void reset_transfer_stats();

// Attributes transfers on this thread to `cause` while alive.
class TransferCauseGuard {
 public:
  explicit TransferCauseGuard(Cause cause);
  ~TransferCauseGuard();

 private:
  Cause previous_;
};

}  // namespace openneuron::integration
