// The driver interface: everything the layers above need from a device.
// A new driver implements this class and registers itself in registry.cc;
// tests/hal/driver_conformance_test.cc checks any driver against it.
//
// The contract on device memory: allocate() returns a DeviceAddress
// (types.h) that only this driver interprets. Every byte of device memory is
// read or written through the driver (copy, Queue::copy_async, fill, update,
// dispatch), never by dereferencing an address, unless properties() says
// host_addressable. The protected driver (drivers/protected/) enforces this:
// its addresses fault on any host access. What a device can do is asked of
// properties(), never inferred from the driver's name.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "hal/event.h"
#include "hal/executable.h"
#include "hal/host_kernels.h"
#include "hal/queue.h"
#include "hal/types.h"

namespace openneuron::hal {

class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string name() const = 0;
  virtual int device_count() const = 0;
  // Throws InvalidDeviceError for a bad index (as do all per-device calls).
  virtual DeviceProperties properties(int device) const = 0;

  // Raw device memory, for the caching allocator. Returns nullptr when the
  // device has no room left (or `bytes` exceeds max_allocation); never
  // throws for lack of memory.
  virtual void* allocate(int device, size_t bytes) = 0;
  virtual void free(int device, void* ptr, size_t bytes) = 0;
  // Bytes currently obtained through allocate() on `device`.
  virtual size_t used_memory(int device) const = 0;
  // What is left for `device`: devices that share one pool of memory (the
  // host driver's, in RAM) see each other's allocations here.
  virtual MemoryBudget memory_budget(int device) const = 0;

  // Synchronous copy: returns when the bytes are in place. It does not wait
  // for queues: order it after their work with Queue::synchronize or an
  // event. Device sides are DeviceAddresses, offsets included; an address
  // range outside every allocation throws InvalidArgumentError where the
  // driver can tell.
  virtual void copy(void* dst, const void* src, size_t bytes,
                    CopyKind kind) = 0;

  virtual std::unique_ptr<Queue> create_queue(int device, int priority) = 0;
  virtual std::unique_ptr<Event> create_event(int device,
                                              bool enable_timing) = 0;
  // Blocks until every queue of `device` is idle.
  virtual void synchronize(int device) = 0;

  // Loads a compiled program for `device` (for the CPU drivers: a shared
  // object made by the compiler), run by Queue::dispatch. Throws Error
  // naming the path when it cannot be loaded.
  virtual std::unique_ptr<Executable> load_executable(int device, const std::string& path) = 0;

  // Kernels host code may run on this driver's memory in place; null unless
  // the memory is host-addressable (host_kernels.h).
  virtual const HostKernels* host_kernels() const { return nullptr; }
};

// The process-wide driver, chosen by OPENNEURON_DRIVER (default "host").
Driver& driver();

}  // namespace openneuron::hal
