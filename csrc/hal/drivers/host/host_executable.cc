#include "hal/drivers/host/host_executable.h"

#include <dlfcn.h>

#include <cstdint>

#include "hal/error.h"

namespace openneuron::hal {

HostExecutable::HostExecutable(const std::string& path, int device)
    : path_(path), device_(device) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    throw Error("cannot load executable " + path + ": " + (why ? why : "unknown error"));
  }
}

HostExecutable::~HostExecutable() {
  if (handle_) dlclose(handle_);
}

int HostExecutable::entry(const std::string& name) {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].info.name == name) return static_cast<int>(i);
  void* sym = dlsym(handle_, name.c_str());
  if (!sym) throw Error("executable " + path_ + " has no entry point '" + name + "'");
  const auto* meta = static_cast<const int64_t*>(dlsym(handle_, (name + "_info").c_str()));
  if (!meta)
    throw Error("executable " + path_ + ": entry point '" + name + "' has no metadata ('" + name +
                "_info'); it was built by an older compiler: clear the kernel cache");
  Entry e;
  e.info.name = name;
  e.info.bindings = static_cast<int>(meta[0]);
  e.info.scalars = static_cast<int>(meta[1]);
  e.info.workgroup_size = {static_cast<int>(meta[2]), static_cast<int>(meta[3]),
                           static_cast<int>(meta[4])};
  e.fn = reinterpret_cast<EntryFn>(sym);
  entries_.push_back(std::move(e));
  return static_cast<int>(entries_.size()) - 1;
}

const HostExecutable::Entry& HostExecutable::at(int index) const {
  if (index < 0 || index >= static_cast<int>(entries_.size()))
    throw InvalidArgumentError("executable " + path_ + ": no entry point #" + std::to_string(index) +
                               " (entry() returned " + std::to_string(entries_.size()) +
                               " so far)");
  return entries_[index];
}

const EntryInfo& HostExecutable::entry_info(int index) const { return at(index).info; }

HostExecutable::EntryFn HostExecutable::function(int index) const { return at(index).fn; }

const HostExecutable& checked_host_executable(const Executable& executable, int device,
                                              int entry, size_t bindings,
                                              size_t scalars) {
  const auto* exe = dynamic_cast<const HostExecutable*>(&executable);
  if (exe == nullptr)
    throw InvalidArgumentError("dispatch: the executable was not loaded by a CPU driver");
  check_dispatch(exe->entry_info(entry), exe->path(), exe->device(), device, bindings, scalars);
  return *exe;
}

}  // namespace openneuron::hal
