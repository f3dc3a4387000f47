// Executables of the host driver: shared objects loaded with dlopen; a
// launch waits for the queue's earlier work and runs on the calling thread,
// as the host driver's eager kernels do, so stream order holds.
#pragma once

#include <string>
#include <vector>

#include "hal/executable.h"

namespace openneuron::hal {

class HostExecutable : public Executable {
 public:
  explicit HostExecutable(const std::string& path);  // throws Error naming path and dlerror
  ~HostExecutable() override;
  HostExecutable(const HostExecutable&) = delete;
  HostExecutable& operator=(const HostExecutable&) = delete;

  int entry(const std::string& name) override;
  void launch(Queue& queue, int index, void** buffers, const int64_t* scalars, int64_t threads) override;

 private:
  using EntryFn = void (*)(void**, const int64_t*, int64_t);
  std::string path_;
  void* handle_ = nullptr;
  std::vector<std::pair<std::string, EntryFn>> entries_;
};

}  // namespace openneuron::hal
