// Executables of the CPU drivers (host, protected): shared objects made by
// the compiler, loaded with dlopen. Each entry point has the C ABI
//   void entry(void** bindings, const int64_t* scalars, int64_t threads)
// and beside it the symbol `<entry>_info`, an int64_t[5] holding
// {bindings, scalars, workgroup x, y, z} (the EntryInfo a dispatch checks).
#pragma once

#include <string>
#include <vector>

#include "hal/executable.h"

namespace openneuron::hal {

class HostExecutable : public Executable {
 public:
  using EntryFn = void (*)(void**, const int64_t*, int64_t);

  // Throws Error naming `path` and dlerror; `device` is for messages.
  HostExecutable(const std::string& path, int device);
  ~HostExecutable() override;
  HostExecutable(const HostExecutable&) = delete;
  HostExecutable& operator=(const HostExecutable&) = delete;

  int entry(const std::string& name) override;
  const EntryInfo& entry_info(int index) const override;

  int device() const { return device_; }
  const std::string& path() const { return path_; }
  EntryFn function(int index) const;

 private:
  struct Entry {
    EntryInfo info;
    EntryFn fn;
  };
  const Entry& at(int index) const;

  std::string path_;
  int device_;
  void* handle_ = nullptr;
  std::vector<Entry> entries_;
};

// The executable of a dispatch, checked against the queue and the entry's
// metadata: throws InvalidArgumentError naming the entry and the counts.
const HostExecutable& checked_host_executable(const Executable& executable, int device,
                                              int entry, size_t bindings,
                                              size_t scalars);

}  // namespace openneuron::hal
