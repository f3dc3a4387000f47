#include "hal/drivers/protected/protected_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "hal/error.h"

namespace openneuron::hal {

ProtectedMemory::~ProtectedMemory() {
  for (auto& [address, region] : regions_) {
    munmap(reinterpret_cast<void*>(address), region.bytes);
    munmap(region.driver_view, region.bytes);
  }
}

void* ProtectedMemory::map(size_t bytes) {
  const int fd = memfd_create("openneuron-protected", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void* device = MAP_FAILED;
  void* driver = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
    device = mmap(nullptr, bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    driver = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  }
  close(fd);  // the mappings keep the memory alive
  if (device == MAP_FAILED || driver == MAP_FAILED) {
    if (device != MAP_FAILED) munmap(device, bytes);
    if (driver != MAP_FAILED) munmap(driver, bytes);
    return nullptr;
  }
  std::unique_lock lock(mutex_);
  regions_.emplace(reinterpret_cast<uintptr_t>(device), Region{bytes, static_cast<char*>(driver)});
  return device;
}

void ProtectedMemory::unmap(void* address, size_t bytes) {
  Region region;
  {
    std::unique_lock lock(mutex_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(address));
    if (it == regions_.end() || it->second.bytes != bytes)
      throw InvalidArgumentError("protected driver: unmap of an address it did not allocate");
    region = it->second;
    regions_.erase(it);
  }
  munmap(address, bytes);
  munmap(region.driver_view, bytes);
}

void* ProtectedMemory::view(DeviceAddress address, size_t bytes) const {
  const auto a = reinterpret_cast<uintptr_t>(address);
  {
    std::shared_lock lock(mutex_);
    auto it = regions_.upper_bound(a);
    if (it != regions_.begin()) {
      --it;
      const uintptr_t offset = a - it->first;
      if (offset < it->second.bytes && bytes <= it->second.bytes - offset)
        return it->second.driver_view + offset;
    }
  }
  char text[96];
  std::snprintf(text, sizeof(text), "%p + %zu bytes", address, bytes);
  throw InvalidArgumentError(std::string("protected driver: device address range ") + text +
                             " is not inside one live allocation (a host pointer, a freed "
                             "buffer, or an access past the end)");
}

}  // namespace openneuron::hal
