// The file format of the Vulkan driver's executables: one file holds a
// program's entry points, each a SPIR-V module (entry point "main") with
// the EntryInfo a dispatch checks. The compiler's GLSL target writes it;
// the driver reads it. No Vulkan headers: the compiler includes this.
//
//   openneuron-spirv 1\n
//   entry <name> <bindings> <scalars> <wx> <wy> <wz> <spirv bytes>\n   (per entry)
//   end\n
//   <the SPIR-V modules, in entry order>
//
// Kernel ABI: the only push constant is the 64-bit device address of the
// dispatch's arguments, laid out (std430) as the binding addresses (uint64)
// then the scalars (int64); a buffer_reference block reads them. No
// descriptor sets, so a kernel takes any number of buffers of any size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hal/types.h"

namespace openneuron::hal {

struct SpirvEntry {
  EntryInfo info;
  std::vector<uint32_t> spirv;
};

// Throws Error naming `path` when it cannot be written.
void write_spirv_executable(const std::string& path, const std::vector<SpirvEntry>& entries);
// Throws Error naming `path` and what is wrong with it.
std::vector<SpirvEntry> read_spirv_executable(const std::string& path);

}  // namespace openneuron::hal
