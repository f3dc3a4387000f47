// Sets up the shared-memory channel of a group through its store, when all
// of its ranks run on this machine (same host name and /dev/shm, same pid
// namespace for liveness checks). Every rank of the group must call it at
// the same point; all of them agree on the answer.
#pragma once

#include <memory>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "torch/distributed/shm_channel.h"

namespace openneuron::integration {

// nullptr when the ranks are not all local, OPENNEURON_DIST_SHM=0 on any of
// them, or any rank could not map the segment (the group then uses Gloo).
std::unique_ptr<ShmChannel> rendezvous_shm_channel(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size);

}  // namespace openneuron::integration
