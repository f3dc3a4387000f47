// An in-order queue (a "stream"): commands run one after another, in the order
// they were enqueued, asynchronously with respect to the calling thread.
#pragma once

#include <cstddef>
#include <functional>

#include "hal/types.h"

namespace openneuron::hal {

class Event;

class Queue {
 public:
  virtual ~Queue() = default;
  virtual int device() const = 0;
  virtual int priority() const = 0;

  // Asynchronous copy of `bytes` bytes; both buffers must stay valid until
  // the copy has run (use an event or synchronize to know when).
  virtual void copy_async(void* dst, const void* src, size_t bytes,
                          CopyKind kind) = 0;
  // Runs `fn` on the queue after everything enqueued before it.
  virtual void host_task(std::function<void()> fn) = 0;
  // Marks this point of the queue in `event` (re-recording replaces it).
  virtual void record(Event& event) = 0;
  // Commands enqueued after this call start only once `event` completed.
  virtual void wait(const Event& event) = 0;

  // True when every enqueued command has finished.
  virtual bool query() const = 0;
  // Blocks until every enqueued command has finished. Rethrows (once) the
  // first error raised by a command since the last synchronize.
  virtual void synchronize() = 0;
};

}  // namespace openneuron::hal
