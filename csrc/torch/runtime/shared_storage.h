// Neuron storages shared with other processes (torch.multiprocessing), on a
// driver whose memory the host can address: the bytes move into a shared
// memory file, as CPU's share_memory_() does, and another process maps it.
#pragma once

#include <cstddef>
#include <utility>

#include <c10/core/Storage.h>

namespace openneuron::integration {

// Moves the storage's bytes into a shared memory file (once; later calls
// return the same file) and returns (file descriptor, bytes). The storage
// keeps its identity; its memory is now the shared mapping. Throws a clear
// error when the driver's memory is not host-addressable.
std::pair<int, size_t> share_storage(const c10::Storage& storage);

// A neuron storage over the shared memory file `fd` (which the caller keeps
// or closes: the mapping holds its own descriptor) on `device`.
c10::Storage storage_from_shared_fd(int fd, size_t nbytes, c10::DeviceIndex device);

// True when the storage's memory is such a shared mapping.
bool is_shared_storage(const c10::Storage& storage);

}  // namespace openneuron::integration
