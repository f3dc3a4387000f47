// Memory the host cannot touch. Each allocation is one memfd mapped twice:
// the device address handed out is mapped PROT_NONE, so any read or write
// by code above the HAL faults at once; the driver's own copies, fills and
// dispatches go through a second, private read-write mapping of the same
// pages (view()). Nothing is ever unprotected, so no host access can slip
// through while the driver happens to be working, and no locking of pages
// is needed across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

#include "hal/drivers/host/host_queue.h"

namespace openneuron::hal {

class ProtectedMemory : public HostMemoryAccess {
 public:
  ~ProtectedMemory() override;

  // A new allocation's device address, or nullptr when the OS refuses.
  void* map(size_t bytes);
  void unmap(void* address, size_t bytes);
  // The driver's pointer for [address, address + bytes): throws
  // InvalidArgumentError naming the address when the range is not inside
  // one live allocation (a stale or foreign pointer, an overrun).
  void* view(DeviceAddress address, size_t bytes) const override;

 private:
  struct Region {
    size_t bytes;
    char* driver_view;
  };
  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, Region> regions_;  // by device address
};

}  // namespace openneuron::hal
