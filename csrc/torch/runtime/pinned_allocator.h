// PyTorch's view of the HAL pinned host allocator (pin_memory(), is_pinned(),
// DataLoader(pin_memory=True)).
#pragma once

#include <c10/core/Allocator.h>

namespace openneuron::integration {

c10::Allocator* pinned_allocator();
bool is_pinned_ptr(const void* ptr);

}  // namespace openneuron::integration
