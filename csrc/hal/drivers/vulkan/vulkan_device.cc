#include "hal/drivers/vulkan/vulkan_device.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <utility>

#include "hal/config.h"
#include "hal/drivers/vulkan/vulkan_cooperative_matrix.h"
#include "hal/error.h"

namespace openneuron::hal {
namespace {

using vk::api;
using vk::check;

std::mutex g_validation_mutex;
std::atomic<size_t> g_validation_count{0};
std::string g_validation_pending;

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) return VK_FALSE;
  const char* text = data && data->pMessage ? data->pMessage : "(no message)";
  std::fprintf(stderr, "[openneuron vulkan validation] %s\n", text);
  ++g_validation_count;
  std::lock_guard lock(g_validation_mutex);
  if (g_validation_pending.empty()) g_validation_pending = text;
  return VK_FALSE;
}

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name) {
  for (const auto& e : list)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice physical) {
  uint32_t count = 0;
  api().vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> list(count);
  api().vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, list.data());
  list.resize(count);
  return list;
}

struct Features {
  VkPhysicalDeviceFeatures2 base{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  Features() {
    base.pNext = &v11;
    v11.pNext = &v12;
  }
  Features(const Features&) = delete;
};

uint32_t api_version(VkPhysicalDevice physical) {
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  api().vkGetPhysicalDeviceProperties2(physical, &props);
  return props.properties.apiVersion;
}

// Why `physical` cannot be a neuron device; empty when it can.
std::string unsuitable_reason(VkPhysicalDevice physical) {
  if (api_version(physical) < VK_API_VERSION_1_2) return "Vulkan 1.2 or newer is required";
  Features f;
  api().vkGetPhysicalDeviceFeatures2(physical, &f.base);
  if (!f.v12.bufferDeviceAddress) return "no buffer device address support";
  if (!f.v12.timelineSemaphore) return "no timeline semaphores";
  if (!f.base.features.shaderInt64) return "no 64-bit integers in shaders (shaderInt64)";
  uint32_t families = 0;
  api().vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
  std::vector<VkQueueFamilyProperties> list(families);
  api().vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, list.data());
  for (const auto& family : list)
    if (family.queueFlags & VK_QUEUE_COMPUTE_BIT) return "";
  return "no compute queue";
}

}  // namespace

size_t vulkan_validation_message_count() { return g_validation_count.load(); }

std::string take_vulkan_validation_message() {
  std::lock_guard lock(g_validation_mutex);
  return std::exchange(g_validation_pending, std::string());
}

// ---- VulkanDevice ----------------------------------------------------------

VulkanDevice::VulkanDevice(VkInstance instance, VkPhysicalDevice physical, int index)
    : physical_(physical), index_(index) {
  // The compute family with the most queues; a compute-only family (an
  // async-compute engine) when it has as many.
  uint32_t family_count = 0;
  api().vkGetPhysicalDeviceQueueFamilyProperties(physical, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  api().vkGetPhysicalDeviceQueueFamilyProperties(physical, &family_count, families.data());
  uint32_t best = UINT32_MAX;
  for (uint32_t i = 0; i < family_count; ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (families[i].timestampValidBits == 0) continue;
    if (best == UINT32_MAX || families[i].queueCount > families[best].queueCount) best = i;
  }
  if (best == UINT32_MAX) {
    for (uint32_t i = 0; i < family_count; ++i)
      if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) best = i;
  }
  queue_family_ = best;
  const uint32_t queue_count = std::min<uint32_t>(families[best].queueCount, 4);
  std::vector<float> priorities(queue_count, 1.0f);
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = queue_family_;
  queue_info.queueCount = queue_count;
  queue_info.pQueuePriorities = priorities.data();

  // Enable what kernels may use and the device has; require the rest.
  Features have;
  api().vkGetPhysicalDeviceFeatures2(physical, &have.base);
  Features want;
  want.base.features.shaderInt64 = VK_TRUE;
  const bool fp64 = have.base.features.shaderFloat64 && config().vulkan_fp64;
  want.base.features.shaderFloat64 = fp64;
  want.base.features.shaderInt16 = have.base.features.shaderInt16;
  want.v11.storageBuffer16BitAccess = have.v11.storageBuffer16BitAccess;
  want.v12.bufferDeviceAddress = VK_TRUE;
  want.v12.timelineSemaphore = VK_TRUE;
  want.v12.hostQueryReset = have.v12.hostQueryReset;
  want.v12.shaderFloat16 = have.v12.shaderFloat16;
  want.v12.shaderInt8 = have.v12.shaderInt8;
  want.v12.storageBuffer8BitAccess = have.v12.storageBuffer8BitAccess;
  want.v12.vulkanMemoryModel = have.v12.vulkanMemoryModel;
  want.v12.vulkanMemoryModelDeviceScope = have.v12.vulkanMemoryModelDeviceScope;
  want.v12.shaderBufferInt64Atomics = have.v12.shaderBufferInt64Atomics;

  const auto extensions = device_extensions(physical);
  std::vector<const char*> enabled;
  // Matrix units, where the device has the shape float16 products use.
  vk::CooperativeMatrixFeatures cooperative_have, cooperative_want;
  bool cooperative = has_extension(extensions, vk::kCooperativeMatrixExtension) &&
                     have.v12.shaderFloat16 && have.v11.storageBuffer16BitAccess &&
                     have.v12.vulkanMemoryModel;
  if (cooperative) {
    VkPhysicalDeviceFeatures2 query{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    query.pNext = &cooperative_have;
    api().vkGetPhysicalDeviceFeatures2(physical, &query);
    cooperative = cooperative_have.cooperativeMatrix && vk::has_float16_16x16x16_matrices(instance, physical);
  }
  if (cooperative) {
    enabled.push_back(vk::kCooperativeMatrixExtension);
    cooperative_want.cooperativeMatrix = VK_TRUE;
    cooperative_want.pNext = want.base.pNext;
    want.base.pNext = &cooperative_want;
  }
  const bool host_import = has_extension(extensions, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) &&
                           api().vkGetMemoryHostPointerPropertiesEXT != nullptr;
  if (host_import) enabled.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);

  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &want.base;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue_info;
  info.enabledExtensionCount = static_cast<uint32_t>(enabled.size());
  info.ppEnabledExtensionNames = enabled.data();
  check(api().vkCreateDevice(physical, &info, nullptr, &device_), "vkCreateDevice");
  for (uint32_t i = 0; i < queue_count; ++i) {
    VkQueue queue = VK_NULL_HANDLE;
    api().vkGetDeviceQueue(device_, queue_family_, i, &queue);
    queues_.push_back(queue);
    queue_mutexes_.push_back(std::make_unique<std::mutex>());
  }

  choose_memory_types();
  read_properties(index);
  if (host_import) {
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT import{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props.pNext = &import;
    api().vkGetPhysicalDeviceProperties2(physical, &props);
    host_import_alignment_ = std::max<VkDeviceSize>(import.minImportedHostPointerAlignment, 1);
  }
  properties_.native_fp64 = fp64;
  // Kernels for what the device has: without float64 shaders the compiler
  // refuses float64 values (glsl_target.h).
  properties_.kernel_target = fp64 ? "glsl" : "glsl_fp32";
  properties_.native_fp16 = have.v12.shaderFloat16 && have.v11.storageBuffer16BitAccess;
  properties_.native_int8 = have.v12.shaderInt8 && have.v12.storageBuffer8BitAccess;
  properties_.cooperative_matrix = cooperative;
  // The cooperative kernel's subgroups are 32 lanes (glsl_gemm_coop.h).
  using MatrixUnits = DeviceProperties::MatrixUnits;
  const std::string& units = config().vulkan_matrix_units;
  properties_.matrix_units =
      units == "emulate" && properties_.tiled_kernels && properties_.native_fp16 ? MatrixUnits::kEmulated
      : units == "1" && cooperative && properties_.subgroup_size == 32 && properties_.tiled_kernels
          ? MatrixUnits::kCooperative
          : MatrixUnits::kNone;

  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(uint64_t)};
  VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout.pushConstantRangeCount = 1;
  layout.pPushConstantRanges = &push;
  check(api().vkCreatePipelineLayout(device_, &layout, nullptr, &pipeline_layout_),
        "vkCreatePipelineLayout");
  load_pipeline_cache();
}

VulkanDevice::~VulkanDevice() {
  if (device_ == VK_NULL_HANDLE) return;
  api().vkDeviceWaitIdle(device_);
  if (pipeline_cache_ != VK_NULL_HANDLE) {
    save_pipeline_cache();
    api().vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
  }
  if (pipeline_layout_ != VK_NULL_HANDLE)
    api().vkDestroyPipelineLayout(device_, pipeline_layout_, nullptr);
  api().vkDestroyDevice(device_, nullptr);
}

void VulkanDevice::choose_memory_types() {
  api().vkGetPhysicalDeviceMemoryProperties(physical_, &memory_properties_);
  const VkPhysicalDeviceMemoryProperties& memory = memory_properties_;
  auto heap_size = [&](uint32_t type) { return memory.memoryHeaps[memory.memoryTypes[type].heapIndex].size; };
  // Device memory: the device-local type on the largest heap.
  int device_type = -1;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    if (!(memory.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) continue;
    if (device_type < 0 || heap_size(i) > heap_size(device_type)) device_type = static_cast<int>(i);
  }
  // Staging: host-visible and coherent; cached where offered (reads back
  // fast), and off the device heap where possible (keeps it for tensors).
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int staging_type = -1, staging_score = -1;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    const auto flags = memory.memoryTypes[i].propertyFlags;
    if ((flags & host) != host) continue;
    const int score = ((flags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? 2 : 0) +
                      ((flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? 0 : 1);
    if (score > staging_score) staging_type = static_cast<int>(i), staging_score = score;
  }
  if (device_type < 0 || staging_type < 0)
    throw Error("vulkan: device " + std::to_string(index_) + " has no usable memory types");
  device_memory_type_ = static_cast<uint32_t>(device_type);
  staging_memory_type_ = static_cast<uint32_t>(staging_type);
  properties_.total_memory = heap_size(device_memory_type_);
  const auto staging_flags = memory.memoryTypes[staging_memory_type_].propertyFlags;
  properties_.unified_memory = (staging_flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0 &&
                               heap_size(staging_memory_type_) == properties_.total_memory;
}

void VulkanDevice::read_properties(int index) {
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maintenance3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &driver;
  driver.pNext = &subgroup;
  subgroup.pNext = &maintenance3;
  const auto extensions = device_extensions(physical_);
  if (has_extension(extensions, "VK_NV_shader_sm_builtins")) maintenance3.pNext = &sm;
  api().vkGetPhysicalDeviceProperties2(physical_, &props);
  const VkPhysicalDeviceLimits& limits = props.properties.limits;

  DeviceProperties& p = properties_;
  p.name = "OpenNeuron vulkan device " + std::to_string(index) + " (" +
           props.properties.deviceName + ")";
  p.driver = "vulkan";
  p.max_allocation = std::min<size_t>(maintenance3.maxMemoryAllocationSize, p.total_memory);
  if (sm.shaderSMCount > 0) {
    p.compute_units = static_cast<int>(sm.shaderSMCount);
  } else if (props.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    p.compute_units = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  } else {
    // The device does not say (no SM-count extension): a mid-size GPU's.
    p.compute_units = 32;
  }
  p.host_addressable = false;
  p.runs_on_host_threads = false;
  p.kernels_read_host_memory = false;
  p.native_int64 = true;  // required to qualify
  p.native_bf16 = false;  // no shader bfloat16 type: emulated in fp32
  p.kernel_target = "glsl";
  p.subgroup_size = static_cast<int>(subgroup.subgroupSize);
  p.shared_memory_bytes = limits.maxComputeSharedMemorySize;
  timestamp_period_ = limits.timestampPeriod;
  for (int axis = 0; axis < 3; ++axis) max_workgroups_[axis] = limits.maxComputeWorkGroupCount[axis];
  p.max_workgroups = limits.maxComputeWorkGroupCount[0];
  if (driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE) p.max_loop_trips = 65535;
  // The tiled kernels take 256 invocations and 17 KiB of shared memory per
  // workgroup (more than Vulkan's minimum limits).
  const bool tiles_fit = limits.maxComputeWorkGroupInvocations >= 256 && limits.maxComputeWorkGroupSize[0] >= 256 &&
                         p.shared_memory_bytes >= 17 * 1024;
  const int tiled = config().vulkan_tiled_kernels;
  p.tiled_kernels = tiles_fit && tiled != 0;
  std::memcpy(pipeline_cache_uuid_, props.properties.pipelineCacheUUID, VK_UUID_SIZE);
}

void VulkanDevice::submit(int hardware_queue, const VkSubmitInfo& info) {
  const int i = hardware_queue % hardware_queue_count();
  std::lock_guard lock(*queue_mutexes_[i]);
  check(api().vkQueueSubmit(queues_[i], 1, &info, VK_NULL_HANDLE), "vkQueueSubmit");
}

void VulkanDevice::wait_idle(int hardware_queue) {
  const int i = hardware_queue % hardware_queue_count();
  std::lock_guard lock(*queue_mutexes_[i]);
  api().vkQueueWaitIdle(queues_[i]);
}

std::string VulkanDevice::pipeline_cache_path() const {
  const std::string& dir = config().vulkan_pipeline_cache_dir;
  if (dir.empty()) return "";
  char uuid[2 * VK_UUID_SIZE + 1];
  for (size_t i = 0; i < VK_UUID_SIZE; ++i) std::snprintf(uuid + 2 * i, 3, "%02x", pipeline_cache_uuid_[i]);
  return dir + "/vulkan-pipelines-" + uuid + ".bin";
}

// The cache's header names the driver and device (pipelineCacheUUID is in
// the file name too): the driver ignores data made for another one.
void VulkanDevice::load_pipeline_cache() {
  std::vector<char> data;
  const std::string path = pipeline_cache_path();
  if (!path.empty()) {
    std::ifstream in(path, std::ios::binary);
    data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  VkPipelineCacheCreateInfo info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  info.initialDataSize = data.size();
  info.pInitialData = data.empty() ? nullptr : data.data();
  if (api().vkCreatePipelineCache(device_, &info, nullptr, &pipeline_cache_) != VK_SUCCESS) {
    info.initialDataSize = 0;  // unreadable data: start empty
    info.pInitialData = nullptr;
    check(api().vkCreatePipelineCache(device_, &info, nullptr, &pipeline_cache_),
          "vkCreatePipelineCache");
  }
}

void VulkanDevice::save_pipeline_cache() const {
  const std::string path = pipeline_cache_path();
  if (path.empty()) return;
  size_t size = 0;
  if (api().vkGetPipelineCacheData(device_, pipeline_cache_, &size, nullptr) != VK_SUCCESS || size == 0)
    return;
  std::vector<char> data(size);
  if (api().vkGetPipelineCacheData(device_, pipeline_cache_, &size, data.data()) != VK_SUCCESS) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(size));
    if (!out) return;
  }
  std::filesystem::rename(temp, path, ec);  // a best effort: the cache only saves time
}

// ---- VulkanContext ---------------------------------------------------------

VulkanContext::VulkanContext() {
  vk::Api& table = api();
  const bool validation = config().vulkan_validation;
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "OpenNeuron";
  app.pEngineName = "OpenNeuron";
  app.apiVersion = VK_API_VERSION_1_3;
  std::vector<const char*> layers, extensions;
  if (validation) {
    uint32_t count = 0;
    table.vkEnumerateInstanceLayerProperties(&count, nullptr);
    std::vector<VkLayerProperties> available(count);
    table.vkEnumerateInstanceLayerProperties(&count, available.data());
    bool found = false;
    for (const auto& layer : available)
      found = found || std::strcmp(layer.layerName, "VK_LAYER_KHRONOS_validation") == 0;
    if (!found)
      throw Error("OPENNEURON_VULKAN_VALIDATION is set but VK_LAYER_KHRONOS_validation is not "
                  "installed (Debian: vulkan-validationlayers)");
    layers.push_back("VK_LAYER_KHRONOS_validation");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  // Synchronization validation too: a missing barrier is a message.
  const VkValidationFeatureEnableEXT enables[] = {
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  if (validation) info.pNext = &features;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  check(table.vkCreateInstance(&info, nullptr, &instance_), "vkCreateInstance");
  vk::load_instance_functions(instance_);
  if (validation) {
    VkDebugUtilsMessengerCreateInfoEXT messenger{
        VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT;
    messenger.pfnUserCallback = on_validation_message;
    check(table.vkCreateDebugUtilsMessengerEXT(instance_, &messenger, nullptr, &messenger_),
          "vkCreateDebugUtilsMessengerEXT");
  }

  uint32_t count = 0;
  check(table.vkEnumeratePhysicalDevices(instance_, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> physical(count);
  check(table.vkEnumeratePhysicalDevices(instance_, &count, physical.data()),
        "vkEnumeratePhysicalDevices");
  physical.resize(count);

  std::vector<int> order = config().vulkan_devices;
  if (order.empty())
    for (uint32_t i = 0; i < count; ++i) order.push_back(static_cast<int>(i));
  std::string refused;
  for (int index : order) {
    if (index >= static_cast<int>(count)) {
      throw Error("OPENNEURON_VULKAN_DEVICES names physical device " + std::to_string(index) +
                  " but this machine has " + std::to_string(count));
    }
    const std::string why = unsuitable_reason(physical[index]);
    if (!why.empty()) {
      VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
      table.vkGetPhysicalDeviceProperties2(physical[index], &props);
      refused += std::string("; ") + props.properties.deviceName + ": " + why;
      continue;
    }
    devices_.push_back(std::make_unique<VulkanDevice>(
        instance_, physical[index], static_cast<int>(devices_.size())));
  }
  if (devices_.empty()) {
    throw Error("no usable Vulkan device (" + std::to_string(count) + " found" + refused +
                "); on a machine without a GPU, install Mesa's lavapipe (mesa-vulkan-drivers)");
  }
}

VulkanContext::~VulkanContext() {
  devices_.clear();
  if (messenger_ != VK_NULL_HANDLE)
    api().vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_ != VK_NULL_HANDLE) api().vkDestroyInstance(instance_, nullptr);
}

}  // namespace openneuron::hal
