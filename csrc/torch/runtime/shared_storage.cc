#include "torch/runtime/shared_storage.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <c10/util/Exception.h>

#include "hal/driver.h"
#include "torch/runtime/device.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {
namespace {

// What a shared storage's DataPtr owns: the mapping and its descriptor.
struct SharedMapping {
  int fd;
  void* ptr;
  size_t nbytes;
};

void unmap(void* context) {
  auto* mapping = static_cast<SharedMapping*>(context);
  if (mapping->nbytes) munmap(mapping->ptr, mapping->nbytes);
  close(mapping->fd);
  delete mapping;
}

[[noreturn]] void fail(const char* what, size_t nbytes) {
  TORCH_CHECK(false, "Sharing a neuron tensor with another process: ", what, " failed for ", nbytes,
              " bytes (", std::strerror(errno), ")");
}

SharedMapping* map_shared(int fd, size_t nbytes) {
  void* ptr = nullptr;
  if (nbytes) {
    ptr = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ptr == MAP_FAILED) {
      close(fd);
      fail("mmap", nbytes);
    }
  }
  return new SharedMapping{fd, ptr, nbytes};
}

c10::DataPtr data_ptr_of(SharedMapping* mapping, c10::DeviceIndex device) {
  return c10::DataPtr(mapping->ptr, mapping, &unmap, c10::Device(kNeuron, device));
}

}  // namespace

bool is_shared_storage(const c10::Storage& storage) {
  return storage.data_ptr().get_deleter() == &unmap;
}

std::pair<int, size_t> share_storage(const c10::Storage& storage) {
  auto* impl = storage.unsafeGetStorageImpl();
  if (is_shared_storage(storage)) {
    auto* mapping = static_cast<SharedMapping*>(impl->data_ptr().get_context());
    return {mapping->fd, mapping->nbytes};
  }
  const auto device = storage.device().index();
  TORCH_CHECK(hal::driver().properties(device).host_addressable,
              "Sharing a neuron tensor with another process needs device memory the host can map; the '",
              hal::driver().name(), "' driver's cannot be. Send the tensor as a CPU tensor "
              "(tensor.cpu().share_memory_()) and move it to the device in the other process.");
  const size_t nbytes = impl->nbytes();
  const int fd = memfd_create("openneuron-shared-tensor", MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create", nbytes);
  if (ftruncate(fd, static_cast<off_t>(nbytes)) != 0) {
    close(fd);
    fail("ftruncate", nbytes);
  }
  SharedMapping* mapping = map_shared(fd, nbytes);
  wait_current_stream(device);  // queued writes land before the bytes move
  // Through the driver, like every read of device memory.
  if (nbytes) hal::driver().copy(mapping->ptr, impl->data(), nbytes, hal::CopyKind::DeviceToHost);
  // The old device memory goes back to the allocator with the old DataPtr.
  impl->set_data_ptr_noswap(data_ptr_of(mapping, device));
  impl->set_resizable(false);  // as CPU's shared storages: a resize would unshare it
  return {fd, nbytes};
}

c10::Storage storage_from_shared_fd(int fd, size_t nbytes, c10::DeviceIndex device) {
  const int own = dup(fd);
  if (own < 0) fail("dup", nbytes);
  SharedMapping* mapping = map_shared(own, nbytes);
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, data_ptr_of(mapping, device),
      /*allocator=*/nullptr, /*resizable=*/false));
}

}  // namespace openneuron::integration
