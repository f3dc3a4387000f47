#include "hal/registry.h"

#include <functional>
#include <utility>

#include "hal/config.h"
#include "hal/drivers/host/host_driver.h"
#include "hal/drivers/protected/protected_driver.h"
#if OPENNEURON_HAL_VULKAN
#include "hal/drivers/vulkan/vulkan_driver.h"
#endif
#include "hal/error.h"

namespace openneuron::hal {
namespace {

using Factory = std::function<std::unique_ptr<Driver>()>;

// A new driver adds one line here.
const std::vector<std::pair<std::string, Factory>>& drivers() {
  static const auto* table = new std::vector<std::pair<std::string, Factory>>{
      {"host", [] { return std::make_unique<HostDriver>(); }},
      {"protected", [] { return std::make_unique<ProtectedDriver>(); }},
#if OPENNEURON_HAL_VULKAN
      {"vulkan", [] { return std::make_unique<VulkanDriver>(); }},
#endif
  };
  return *table;
}

}  // namespace

std::vector<std::string> driver_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : drivers()) names.push_back(name);
  return names;
}

std::unique_ptr<Driver> create_driver(const std::string& name) {
  for (const auto& [known, factory] : drivers()) {
    if (known == name) return factory();
  }
  std::string known_list;
  for (const auto& [known, factory] : drivers()) {
    known_list += (known_list.empty() ? "'" : ", '") + known + "'";
  }
  throw Error("Unknown OpenNeuron driver '" + name +
              "' (set by OPENNEURON_DRIVER); known drivers: " + known_list);
}

Driver& driver() {
  // Leaked on purpose: allocators and queues that outlive static destruction
  // may still call into the driver at exit.
  static Driver* const instance = create_driver(config().driver).release();
  return *instance;
}

}  // namespace openneuron::hal
