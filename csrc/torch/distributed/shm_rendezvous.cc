#include "torch/distributed/shm_rendezvous.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>

#include <c10/util/Logging.h>

namespace openneuron::integration {
namespace {

constexpr size_t kDefaultSlotBytes = 4 << 20;
constexpr size_t kMaxSegmentBytes = 256 << 20;

std::string text(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::vector<uint8_t> bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// What must match across ranks for the channel to be used: this machine,
// and whether the user allows it.
std::string locality() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const char* env = std::getenv("OPENNEURON_DIST_SHM");
  const bool enabled = !(env && std::string(env) == "0");
  return std::string(enabled ? "shm|" : "off|") + host;
}

std::string pid_namespace() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return "?";
  return std::to_string(st.st_ino);
}

std::string segment_name() {
  std::random_device rd;
  return "/openneuron-" + std::to_string(getpid()) + "-" +
         std::to_string(rd());
}

}  // namespace

std::unique_ptr<ShmChannel> rendezvous_shm_channel(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
  const std::string prefix = "neuron_shm/";
  const std::string mine = locality();
  store->set(prefix + "where/" + std::to_string(rank), bytes(mine));
  bool local = mine.rfind("shm|", 0) == 0;
  for (int r = 0; r < size; ++r)
    local &= text(store->get(prefix + "where/" + std::to_string(r))) == mine;
  if (!local) return nullptr;

  store->set(prefix + "pidns/" + std::to_string(rank), bytes(pid_namespace()));
  const size_t slot_bytes =
      std::min(kDefaultSlotBytes, kMaxSegmentBytes / (2 * size)) / 4096 * 4096;
  std::unique_ptr<ShmChannel> channel;
  std::string name, error;
  if (rank == 0) {
    name = segment_name();
    try {
      channel.reset(ShmChannel::create(name, rank, size, slot_bytes));
    } catch (const std::exception& e) {
      error = e.what();
      name.clear();
    }
    store->set(prefix + "name", bytes(name));
  } else {
    name = text(store->get(prefix + "name"));
    if (!name.empty()) {
      try {
        channel.reset(ShmChannel::open(name, rank, size, slot_bytes));
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
  }
  store->set(prefix + "mapped/" + std::to_string(rank),
             bytes(channel ? "1" : "0"));
  bool all_mapped = true, same_pidns = true;
  const std::string ns = pid_namespace();
  for (int r = 0; r < size; ++r) {
    all_mapped &= text(store->get(prefix + "mapped/" + std::to_string(r))) == "1";
    same_pidns &= text(store->get(prefix + "pidns/" + std::to_string(r))) == ns;
  }
  // Every rank mapped it (or gave up): the name is no longer needed, and
  // nothing is left in /dev/shm whatever happens to the processes.
  if (rank == 0 && !name.empty()) ShmChannel::unlink(name);
  if (!all_mapped) {
    if (!error.empty())
      LOG(WARNING) << "neuron backend: shared-memory collectives off, "
                   << "collectives go through Gloo: " << error;
    return nullptr;
  }
  channel->set_check_pids(same_pidns);
  return channel;
}

}  // namespace openneuron::integration
