// An in-order queue (a "stream"): commands run one after another, in the order
// they were enqueued, asynchronously with respect to the calling thread.
//
// A driver may record commands and submit them in batches (a GPU's command
// buffer): flush() submits what was recorded; synchronize(), query() and
// events recorded on the queue flush first, so batching never changes what a
// caller can observe, only when the device starts the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "hal/types.h"

namespace openneuron::hal {

class Event;
class Executable;

class Queue {
 public:
  virtual ~Queue() = default;
  virtual int device() const = 0;
  virtual int priority() const = 0;

  // Asynchronous copy of `bytes` bytes; both buffers must stay valid until
  // the copy has run (use an event or synchronize to know when). Device
  // sides are DeviceAddresses of this queue's driver, offsets included.
  virtual void copy_async(void* dst, const void* src, size_t bytes,
                          CopyKind kind) = 0;
  // Fills `bytes` bytes of device memory at `dst` with `pattern`, whose low
  // `pattern_size` bytes (1, 2, 4 or 8) repeat; `bytes` must be a multiple
  // of `pattern_size`. Throws InvalidArgumentError otherwise.
  virtual void fill(DeviceAddress dst, size_t bytes, uint64_t pattern,
                    int pattern_size) = 0;
  // Writes `bytes` (at most kMaxUpdateBytes) host bytes to device memory in
  // queue order. The bytes are captured now: `src` may be reused at once.
  static constexpr size_t kMaxUpdateBytes = 65536;
  virtual void update(DeviceAddress dst, const void* src, size_t bytes) = 0;
  // Runs entry `entry` of `executable` (loaded for this queue's device) on
  // `bindings` (device addresses, as many as the entry's EntryInfo says) and
  // `scalars` (idem), over `grid`, after everything enqueued before it.
  // Throws InvalidArgumentError for a wrong entry or argument count.
  virtual void dispatch(Executable& executable, int entry,
                        std::span<const DeviceAddress> bindings,
                        std::span<const int64_t> scalars, Grid grid) = 0;
  // Runs `fn` on the host after everything enqueued before it.
  virtual void host_task(std::function<void()> fn) = 0;
  // Marks this point of the queue in `event` (re-recording replaces it).
  virtual void record(Event& event) = 0;
  // Commands enqueued after this call start only once `event` completed.
  virtual void wait(const Event& event) = 0;
  // Submits the work recorded so far (a no-op for drivers that submit each
  // command as it comes).
  virtual void flush() {}

  // True when every enqueued command has finished.
  virtual bool query() const = 0;
  // Blocks until every enqueued command has finished. Rethrows (once) the
  // first error raised by a command since the last synchronize.
  virtual void synchronize() = 0;
};

}  // namespace openneuron::hal
