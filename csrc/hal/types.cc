#include "hal/types.h"

namespace openneuron::hal {

const char* to_string(CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice:
      return "HostToDevice";
    case CopyKind::DeviceToHost:
      return "DeviceToHost";
    case CopyKind::DeviceToDevice:
      return "DeviceToDevice";
  }
  return "UnknownCopyKind";
}

}  // namespace openneuron::hal
