// herd devices [--json] [--device auto|cpu|vulkan[:N]] [--bandwidth]
// What this machine can compute on: its CPU (cores, memory, the kernels' instruction set)
// and every Vulkan device (memory heaps, subgroups, the features herd's shaders use). With
// --device, only that device, and an error when it is not there (as a model command's
// --device would say). --bandwidth measures each one's memory bandwidth: the CPU's read
// bandwidth (util/bandwidth.h), each Vulkan device's buffer-to-buffer copy (vulkan/bandwidth.h).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "kernels/matmul.h"
#include "util/bandwidth.h"
#include "util/cpu_info.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "vulkan/device_choice.h"
#include "vulkan/device_info.h"

namespace herd::cli {
namespace {

struct DevicesArgs {
  bool json = false;
  std::string device;  // empty: every device
  bool bandwidth = false;
};

// GB/s (10^9 bytes per second) of the CPU's reads over all its threads.
double cpu_bandwidth_gbs() {
  ThreadPool pool(default_thread_count());
  return measure_read_bandwidth(pool) / 1e9;
}

// GB/s of a Vulkan device's copies (reads plus writes), or 0 with a note on stderr when it
// cannot be measured (too little memory free): a listing goes on.
double vulkan_bandwidth_gbs(const vulkan::DeviceInfo& d) {
  try {
    return vulkan::measure_copy_bandwidth_gbs(d.index);
  } catch (const Error& e) {
    std::fprintf(stderr, "herd devices: vulkan:%d: no bandwidth measured: %s\n", d.index, e.what());
    return 0;
  }
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

nlohmann::json cpu_json() {
  const SystemMemory memory = system_memory();
  return {{"kind", "cpu"},
          {"cores", cpu_cores().logical},
          {"threads_default", default_thread_count()},
          {"isa", std::string(kernels::isa_name(kernels::best_isa(kernels::detect_cpu())))},
          {"memory_bytes", memory.total_bytes},
          {"available_bytes", memory.available_bytes},
          {"unified_memory", memory.unified}};
}

void print_cpu() {
  const SystemMemory memory = system_memory();
  std::printf("cpu       %s, %s memory (%s available), kernels %s\n",
              cpu_cores_text(cpu_cores()).c_str(), gib(memory.total_bytes).c_str(),
              gib(memory.available_bytes).c_str(),
              std::string(kernels::isa_name(kernels::best_isa(kernels::detect_cpu()))).c_str());
}

nlohmann::json vulkan_json(const vulkan::DeviceInfo& d) {
  nlohmann::json heaps = nlohmann::json::array();
  for (const vulkan::MemoryHeap& h : d.heaps) {
    heaps.push_back({{"bytes", h.bytes},
                     {"budget_bytes", h.budget},
                     {"device_local", h.device_local},
                     {"host_visible", h.host_visible}});
  }
  return {{"kind", "vulkan"},
          {"device", "vulkan:" + std::to_string(d.index)},
          {"name", d.name},
          {"type", vulkan::device_type_name(d.type)},
          {"vendor", d.vendor},
          {"driver", d.driver},
          {"api_version", d.api_version},
          {"heaps", heaps},
          {"device_local_bytes", d.device_local_bytes()},
          {"unified_memory", d.unified_memory},
          {"subgroup_size", d.subgroup_size},
          {"subgroup_operations", d.subgroup_operations},
          {"shader_float16", d.shader_float16},
          {"shader_int8", d.shader_int8},
          {"storage_16bit", d.storage_16bit},
          {"storage_8bit", d.storage_8bit},
          {"integer_dot_product", d.integer_dot_product},
          {"cooperative_matrix", d.cooperative_matrix},
          {"max_workgroup_size", d.max_workgroup_size},
          {"max_shared_memory_bytes", d.max_shared_memory},
          {"max_storage_buffer_bytes", d.max_storage_buffer_range}};
}

void run_devices(const DevicesArgs& args) {
  const vulkan::DeviceChoice choice =
      args.device.empty() ? vulkan::DeviceChoice{} : vulkan::parse_device_choice(args.device);
  const bool show_cpu = args.device.empty() || choice.kind != vulkan::DeviceChoice::kVulkan;
  const bool show_vulkan = args.device.empty() || choice.kind != vulkan::DeviceChoice::kCpu;
  std::vector<vulkan::DeviceInfo> devices;
  std::string vulkan_error;
  if (show_vulkan) {
    if (choice.kind == vulkan::DeviceChoice::kVulkan) {
      // The device asked for must be there: an error otherwise, as a model command's.
      const int index = vulkan::resolve_vulkan_device(choice);
      devices.push_back(vulkan::list_devices()[static_cast<size_t>(index)]);
    } else {
      try {
        devices = vulkan::list_devices();
      } catch (const Error& e) {
        vulkan_error = e.what();
      }
    }
  }
  const double cpu_gbs = show_cpu && args.bandwidth ? cpu_bandwidth_gbs() : 0;
  std::vector<double> vulkan_gbs;
  for (const vulkan::DeviceInfo& d : devices) {
    vulkan_gbs.push_back(args.bandwidth ? vulkan_bandwidth_gbs(d) : 0);
  }
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    if (show_cpu) {
      out.push_back(cpu_json());
      if (args.bandwidth) out.back()["read_bandwidth_gbs"] = cpu_gbs;
    }
    for (size_t i = 0; i < devices.size(); ++i) {
      out.push_back(vulkan_json(devices[i]));
      if (args.bandwidth) out.back()["copy_bandwidth_gbs"] = vulkan_gbs[i];
    }
    nlohmann::json result = {{"devices", out}};
    if (!vulkan_error.empty()) result["vulkan_error"] = vulkan_error;
    std::printf("%s\n", result.dump(2).c_str());
    return;
  }
  if (show_cpu) {
    print_cpu();
    if (args.bandwidth) std::printf("  bandwidth   %.1f GB/s read\n", cpu_gbs);
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    std::printf("%s", vulkan::describe(devices[i]).c_str());
    if (args.bandwidth && vulkan_gbs[i] > 0) {
      std::printf("  bandwidth   %.1f GB/s copy (read + write)\n", vulkan_gbs[i]);
    }
  }
  if (!vulkan_error.empty()) std::printf("vulkan    none: %s\n", vulkan_error.c_str());
}

}  // namespace

void add_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "devices", "List this machine's CPU and Vulkan devices with their memory and features");
  auto args = std::make_shared<DevicesArgs>();
  cmd->add_flag("--json", args->json, "Print JSON instead of text");
  cmd->add_option("--device", args->device,
                  "Only this device: auto, cpu, vulkan or vulkan:N (an error when absent)");
  cmd->add_flag("--bandwidth", args->bandwidth,
                "Measure each device's memory bandwidth (a second or so each)");
  cmd->callback([args] { run_devices(*args); });
}

}  // namespace herd::cli
