// NodeProfile: what one machine offers the planner: cores, free memory and measured speed.
// Nodes report it over the wire (PROFILE), `herd plan --node-profile FILE.json` reads it
// from files, and measure_local_profile() (local_profile.h) measures this machine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace herd {

// A GPU of a node, which the planner sees as a rank of the node beside its CPU (and which
// engine/device_placement.h fills first).
struct DeviceProfile {
  std::string name;           // as --device spells it: "vulkan:0"
  std::string description;    // "NVIDIA GeForce RTX 4090 (discrete)"
  uint64_t memory_bytes = 0;  // device-local memory (before the headroom)
  double bandwidth_gbs = 0;   // measured copy bandwidth; 0 when not measured
  bool unified = false;       // an integrated GPU: its memory is the node's own

  bool operator==(const DeviceProfile&) const = default;
};

struct NodeProfile {
  std::string name;
  std::string address;  // "host:port", or "local" for the machine the coordinator runs on
  int cores = 1;
  uint64_t free_memory_bytes = 0;   // what the node can give a model (before the headroom)
  double bandwidth_gbs = 0;         // measured memory read bandwidth, 1e9 bytes per second
  double matmul_gflops = 0;         // measured; 0 when unknown (the planner does not use it yet)
  uint64_t total_memory_bytes = 0;  // physical memory; 0 when unknown
  // The CPU shares its memory with the GPU (Apple Silicon). The planner then leaves the
  // system its share of the total as well (unified_model_limit(), rank_memory.h).
  bool unified_memory = false;
  // The GPUs the node runs models on (its --device); empty: the CPU only.
  std::vector<DeviceProfile> devices = {};

  bool operator==(const NodeProfile&) const = default;
};

nlohmann::json to_json(const NodeProfile& node);
// The "devices" array alone (a node's PROFILE message carries it in its details).
nlohmann::json devices_to_json(const std::vector<DeviceProfile>& devices);
std::vector<DeviceProfile> devices_from_json(const nlohmann::json& devices,
                                             const std::string& where);
// Throws herd::Error("[plan] <where>: field '...' ...") naming a missing, mistyped or
// out-of-range field (cores >= 1, bandwidth_gbs > 0, matmul_gflops >= 0).
// total_memory_bytes, unified_memory and devices may be missing (profiles written before
// they existed): 0, false and none.
NodeProfile node_profile_from_json(const nlohmann::json& j, const std::string& where);
// A JSON text holding one profile object or an array of them. `origin` names the text in
// errors (a file name). Throws herd::Error on bad JSON or a bad profile.
std::vector<NodeProfile> node_profiles_from_text(std::string_view text, const std::string& origin);

}  // namespace herd
