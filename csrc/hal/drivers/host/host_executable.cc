#include "hal/drivers/host/host_executable.h"

#include <dlfcn.h>

#include "hal/error.h"
#include "hal/queue.h"

namespace openneuron::hal {

HostExecutable::HostExecutable(const std::string& path) : path_(path) {
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
    if (entries_[i].first == name) return static_cast<int>(i);
  void* sym = dlsym(handle_, name.c_str());
  if (!sym) throw Error("executable " + path_ + " has no entry point '" + name + "'");
  entries_.emplace_back(name, reinterpret_cast<EntryFn>(sym));
  return static_cast<int>(entries_.size()) - 1;
}

void HostExecutable::launch(Queue& queue, int index, void** buffers, const int64_t* scalars, int64_t threads) {
  if (index < 0 || index >= static_cast<int>(entries_.size()))
    throw Error("executable " + path_ + ": no entry point #" + std::to_string(index));
  if (!queue.query()) queue.synchronize();
  entries_[index].second(buffers, scalars, threads);
}

}  // namespace openneuron::hal
