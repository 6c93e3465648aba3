// Reads each physical device's properties, features and memory through
// vkGetPhysicalDevice*2 with the structures of what herd's shaders can use chained in; a
// structure is chained only where the device's version or an extension says it knows it.
#include "vulkan/device_info.h"

#include <cstdio>
#include <cstring>

#include "util/error.h"
#include "vulkan/context.h"
#include "vulkan/loader.h"

namespace herd::vulkan {
namespace {

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x10DE:
      return "NVIDIA";
    case 0x1002:
      return "AMD";
    case 0x8086:
      return "Intel";
    case 0x106B:
      return "Apple";
    case 0x13B5:
      return "ARM";
    case 0x5143:
      return "Qualcomm";
    case 0x1010:
      return "Imagination";
    case 0x10005:
      return "Mesa";
    default: {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "0x%04x", id);
      return hex;
    }
  }
}

DeviceType device_type(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceType::kIntegrated;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceType::kDiscrete;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceType::kVirtual;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceType::kCpu;
    default:
      return DeviceType::kOther;
  }
}

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

struct SubgroupOp {
  VkSubgroupFeatureFlagBits bit;
  const char* name;
};
const SubgroupOp kSubgroupOps[] = {
    {VK_SUBGROUP_FEATURE_BASIC_BIT, "basic"},
    {VK_SUBGROUP_FEATURE_VOTE_BIT, "vote"},
    {VK_SUBGROUP_FEATURE_ARITHMETIC_BIT, "arithmetic"},
    {VK_SUBGROUP_FEATURE_BALLOT_BIT, "ballot"},
    {VK_SUBGROUP_FEATURE_SHUFFLE_BIT, "shuffle"},
    {VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT, "shuffle_relative"},
    {VK_SUBGROUP_FEATURE_CLUSTERED_BIT, "clustered"},
    {VK_SUBGROUP_FEATURE_QUAD_BIT, "quad"},
};

}  // namespace

std::vector<std::string> device_extensions(const Instance& instance, VkPhysicalDevice device) {
  const Api& api = instance.api();
  uint32_t n = 0;
  check(api.vkEnumerateDeviceExtensionProperties(device, nullptr, &n, nullptr),
        "vkEnumerateDeviceExtensionProperties");
  std::vector<VkExtensionProperties> list(n);
  check(api.vkEnumerateDeviceExtensionProperties(device, nullptr, &n, list.data()),
        "vkEnumerateDeviceExtensionProperties");
  std::vector<std::string> names;
  for (uint32_t i = 0; i < n; ++i) names.emplace_back(list[i].extensionName);
  return names;
}

namespace {

// What one physical device offers, as read_device_info asks for it: `has` says whether the
// device offers an extension; structures are chained only where the version or an extension
// says the driver knows them.
struct Query {
  const Api& api;
  VkPhysicalDevice device;
  const std::vector<std::string>& extensions;
  VkPhysicalDeviceProperties basic;

  bool has(const char* name) const {
    for (const std::string& e : extensions) {
      if (e == name) return true;
    }
    return false;
  }
  bool v12() const { return basic.apiVersion >= VK_API_VERSION_1_2; }
  bool v13() const { return basic.apiVersion >= VK_API_VERSION_1_3; }
};

// Name, type, vendor, driver, subgroups and limits.
void read_properties(const Query& query, DeviceInfo& info) {
  const VkPhysicalDeviceProperties& basic = query.basic;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  subgroup.pNext = &maintenance3;
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  const bool has_driver = query.v12() || query.has(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
  if (has_driver) maintenance3.pNext = &driver;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &subgroup;
  query.api.vkGetPhysicalDeviceProperties2(query.device, &properties);

  info.name = basic.deviceName;
  info.type = device_type(basic.deviceType);
  info.vendor_id = basic.vendorID;
  info.vendor = vendor_name(basic.vendorID);
  info.driver = has_driver ? std::string(driver.driverName) + " " + driver.driverInfo
                           : "driver " + std::to_string(basic.driverVersion);
  info.api_version = version_string(basic.apiVersion);

  const bool compute_subgroups = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  info.subgroup_size = subgroup.subgroupSize;
  for (const SubgroupOp& op : kSubgroupOps) {
    if (compute_subgroups && (subgroup.supportedOperations & op.bit)) {
      info.subgroup_operations.emplace_back(op.name);
    }
  }
  info.subgroup_arithmetic =
      compute_subgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  info.subgroup_shuffle =
      compute_subgroups && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);

  info.max_workgroup_size = basic.limits.maxComputeWorkGroupInvocations;
  info.max_shared_memory = basic.limits.maxComputeSharedMemorySize;
  info.max_storage_buffer_range = basic.limits.maxStorageBufferRange;
  info.max_allocation = maintenance3.maxMemoryAllocationSize;
}

// float16 / int8, 8- and 16-bit storage, integer dot product, cooperative matrix.
void read_features(const Query& query, DeviceInfo& info) {
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  void** next = &storage16.pNext;
  VkPhysicalDevice8BitStorageFeatures storage8{};
  storage8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  if (query.v12() || query.has(VK_KHR_8BIT_STORAGE_EXTENSION_NAME)) {
    *next = &storage8;
    next = &storage8.pNext;
  }
  VkPhysicalDeviceShaderFloat16Int8Features float16_int8{};
  float16_int8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  if (query.v12() || query.has(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) {
    *next = &float16_int8;
    next = &float16_int8.pNext;
  }
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  if (query.v13() || query.has(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) {
    *next = &dot;
    next = &dot.pNext;
  }
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &storage16;
  query.api.vkGetPhysicalDeviceFeatures2(query.device, &features);

  info.shader_float16 = float16_int8.shaderFloat16;
  info.shader_int8 = float16_int8.shaderInt8;
  info.storage_16bit = storage16.storageBuffer16BitAccess;
  info.storage_8bit = storage8.storageBuffer8BitAccess;
  info.integer_dot_product = dot.shaderIntegerDotProduct;
  // The headers herd builds with may predate the extension's structures: offered is enough.
  info.cooperative_matrix = query.has("VK_KHR_cooperative_matrix");
}

// The heaps (size, budget, device-local, host-visible) and whether memory is unified.
// REQUIRES: info.type set (read_properties).
void read_memory(const Query& query, DeviceInfo& info) {
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
  budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
  const bool has_budget = query.has(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkPhysicalDeviceMemoryProperties2 memory{};
  memory.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
  if (has_budget) memory.pNext = &budget;
  query.api.vkGetPhysicalDeviceMemoryProperties2(query.device, &memory);

  const VkPhysicalDeviceMemoryProperties& m = memory.memoryProperties;
  bool device_local_host_visible = false;
  for (uint32_t h = 0; h < m.memoryHeapCount; ++h) {
    MemoryHeap heap;
    heap.bytes = m.memoryHeaps[h].size;
    heap.budget = has_budget ? budget.heapBudget[h] : 0;
    heap.device_local = (m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
    for (uint32_t t = 0; t < m.memoryTypeCount; ++t) {
      const VkMemoryPropertyFlags flags = m.memoryTypes[t].propertyFlags;
      if (m.memoryTypes[t].heapIndex != h) continue;
      if (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) heap.host_visible = true;
      if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
          (flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) {
        device_local_host_visible = true;
      }
    }
    info.heaps.push_back(heap);
  }
  // A discrete card's small BAR window is device-local and host-visible too: only devices
  // that are integrated (or the CPU itself) share all their memory with the host.
  info.unified_memory = device_local_host_visible &&
                        (info.type == DeviceType::kIntegrated || info.type == DeviceType::kCpu);
}

}  // namespace

DeviceInfo read_device_info(const Instance& instance, VkPhysicalDevice device, int index) {
  const std::vector<std::string> extensions = device_extensions(instance, device);
  Query query{instance.api(), device, extensions, {}};
  instance.api().vkGetPhysicalDeviceProperties(device, &query.basic);
  DeviceInfo info;
  info.index = index;
  read_properties(query, info);
  read_features(query, info);
  read_memory(query, info);
  return info;
}

bool built_with_vulkan() {
  return true;
}

std::vector<DeviceInfo> list_devices() {
  const std::shared_ptr<Instance> instance = Instance::shared();
  const std::vector<VkPhysicalDevice> devices = instance->physical_devices();
  if (devices.empty()) {
    throw Error("vulkan",
                "the Vulkan loader reports no device: install a driver "
                "(mesa-vulkan-drivers has lavapipe, a CPU driver; scripts/install-deps)");
  }
  std::vector<DeviceInfo> list;
  for (size_t i = 0; i < devices.size(); ++i) {
    list.push_back(read_device_info(*instance, devices[i], static_cast<int>(i)));
  }
  return list;
}

}  // namespace herd::vulkan
