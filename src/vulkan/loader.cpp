#include "vulkan/loader.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "util/error.h"

namespace herd::vulkan {

const char* result_name(VkResult result) {
  switch (result) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_INCOMPLETE:
      return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST (the driver reset the device)";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FRAGMENTED_POOL:
      return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV:
      return "VK_ERROR_INVALID_SHADER_NV";
    default:
      return "VkResult";
  }
}

void check(VkResult result, const std::string& what) {
  if (result == VK_SUCCESS) return;
  throw Error("vulkan", what + ": " + result_name(result) + " (" + std::to_string(result) + ")");
}

namespace {

// The loader's names: Linux and the BSDs, then macOS (the Vulkan SDK's or Homebrew's
// vulkan-loader, else MoltenVK itself, which loader-less programs can open too), then the
// library CMake found at build time (HERD_VULKAN_LIBRARY): Homebrew's prefix on Apple
// Silicon, /opt/homebrew/lib, is not on dlopen's default path.
#if defined(__APPLE__)
const char* const kLibraries[] = {"libvulkan.1.dylib", "libvulkan.dylib", "libMoltenVK.dylib",
                                  HERD_VULKAN_LIBRARY};
#else
const char* const kLibraries[] = {"libvulkan.so.1", "libvulkan.so", HERD_VULKAN_LIBRARY};
#endif

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name) {
  for (const VkExtensionProperties& e : list) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

// The loader's library, or an error naming the ones tried.
void* open_loader() {
  std::string tried;
  for (const char* name : kLibraries) {
    void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) return library;
    if (!tried.empty()) tried += ", ";
    tried += name;
  }
  throw Error("vulkan", "no Vulkan loader on this machine (tried " + tried +
                            "): install libvulkan1 and a driver (mesa-vulkan-drivers), or "
                            "vulkan-loader and molten-vk on macOS (scripts/install-deps)");
}

// A Vulkan 1.1 instance, with MoltenVK's portability enumeration where the loader offers it.
// REQUIRES: api's global functions loaded.
VkInstance create_instance(const Api& api) {
  uint32_t version = VK_API_VERSION_1_0;
  if (api.vkEnumerateInstanceVersion != nullptr) api.vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_1) {
    throw Error("vulkan", "the Vulkan loader offers version " +
                              std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
                              std::to_string(VK_API_VERSION_MINOR(version)) +
                              "; herd needs 1.1 (update libvulkan1)");
  }
  uint32_t n_extensions = 0;
  api.vkEnumerateInstanceExtensionProperties(nullptr, &n_extensions, nullptr);
  std::vector<VkExtensionProperties> extensions(n_extensions);
  api.vkEnumerateInstanceExtensionProperties(nullptr, &n_extensions, extensions.data());
  std::vector<const char*> enabled;
  VkInstanceCreateFlags flags = 0;
  // MoltenVK is a "portability" driver: the loader lists it only when asked to.
  if (has_extension(extensions, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    enabled.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "herd";
  app.pEngineName = "herd";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledExtensionCount = static_cast<uint32_t>(enabled.size());
  info.ppEnabledExtensionNames = enabled.data();
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult result = api.vkCreateInstance(&info, nullptr, &instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) {
    throw Error("vulkan",
                "the Vulkan loader found no driver (VK_ERROR_INCOMPATIBLE_DRIVER): "
                "install one (mesa-vulkan-drivers has lavapipe, a CPU driver)");
  }
  check(result, "vkCreateInstance");
  return instance;
}

}  // namespace

std::shared_ptr<Instance> Instance::shared() {
  static std::mutex mutex;
  // Never destroyed (see the header): a pointer, so no destructor runs at exit either.
  static std::shared_ptr<Instance>* instance = nullptr;
  const std::lock_guard<std::mutex> lock(mutex);
  if (instance == nullptr) instance = new std::shared_ptr<Instance>(create());
  return *instance;
}

std::shared_ptr<Instance> Instance::create() {
  std::shared_ptr<Instance> self(new Instance());
  self->library_ = open_loader();
  Api& api = self->api_;
  api.vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(self->library_, "vkGetInstanceProcAddr"));
  if (api.vkGetInstanceProcAddr == nullptr) {
    throw Error("vulkan", "the Vulkan loader has no vkGetInstanceProcAddr");
  }
#define HERD_VK_LOAD_GLOBAL(name) \
  api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));
  HERD_VK_GLOBAL_FUNCTIONS(HERD_VK_LOAD_GLOBAL)
#undef HERD_VK_LOAD_GLOBAL
  if (api.vkCreateInstance == nullptr || api.vkEnumerateInstanceExtensionProperties == nullptr) {
    throw Error("vulkan", "the Vulkan loader lacks vkCreateInstance");
  }
  self->instance_ = create_instance(api);
#define HERD_VK_LOAD(name) \
  api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(self->instance_, #name));
  HERD_VK_INSTANCE_FUNCTIONS(HERD_VK_LOAD)
  HERD_VK_DEVICE_FUNCTIONS(HERD_VK_LOAD)
#undef HERD_VK_LOAD
  // vkDestroyInstance first: the destructor needs it even when another is missing.
  if (api.vkDestroyInstance == nullptr) {
    throw Error("vulkan", "the Vulkan loader lacks vkDestroyInstance");
  }
#define HERD_VK_REQUIRE(name) \
  if (api.name == nullptr) throw Error("vulkan", "the Vulkan loader lacks " #name);
  HERD_VK_INSTANCE_FUNCTIONS(HERD_VK_REQUIRE)
  HERD_VK_DEVICE_FUNCTIONS(HERD_VK_REQUIRE)
#undef HERD_VK_REQUIRE
  return self;
}

Instance::~Instance() {
  if (instance_ != VK_NULL_HANDLE && api_.vkDestroyInstance != nullptr) {
    api_.vkDestroyInstance(instance_, nullptr);
  }
  if (library_ != nullptr) dlclose(library_);
}

std::vector<VkPhysicalDevice> Instance::physical_devices() const {
  uint32_t n = 0;
  check(api_.vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(n);
  check(api_.vkEnumeratePhysicalDevices(instance_, &n, devices.data()),
        "vkEnumeratePhysicalDevices");
  devices.resize(n);
  return devices;
}

}  // namespace herd::vulkan
