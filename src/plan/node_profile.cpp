#include "plan/node_profile.h"

#include "plan/json_fields.h"
#include "util/error.h"

namespace herd {

using namespace json_fields;

nlohmann::json devices_to_json(const std::vector<DeviceProfile>& devices) {
  nlohmann::json j = nlohmann::json::array();
  for (const DeviceProfile& d : devices) {
    j.push_back({{"name", d.name},
                 {"description", d.description},
                 {"memory_bytes", d.memory_bytes},
                 {"bandwidth_gbs", d.bandwidth_gbs},
                 {"unified", d.unified}});
  }
  return j;
}

std::vector<DeviceProfile> devices_from_json(const nlohmann::json& devices,
                                             const std::string& where) {
  if (!devices.is_array() || devices.size() > 64) {
    bad_field("devices", where, "must be an array of at most 64 devices");
  }
  std::vector<DeviceProfile> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string at = where + ".devices[" + std::to_string(i) + "]";
    if (!devices[i].is_object()) bad_field("devices", where, "must hold objects");
    DeviceProfile d;
    d.name = get_string(devices[i], "name", at);
    d.description = get_string(devices[i], "description", at);
    d.memory_bytes = get_uint(devices[i], "memory_bytes", at);
    d.bandwidth_gbs = get_double(devices[i], "bandwidth_gbs", at);
    if (!(d.bandwidth_gbs >= 0)) bad_field("bandwidth_gbs", at, "must not be negative");
    d.unified = get_bool(devices[i], "unified", at);
    out.push_back(std::move(d));
  }
  return out;
}

nlohmann::json to_json(const NodeProfile& node) {
  return {{"name", node.name},
          {"address", node.address},
          {"cores", node.cores},
          {"free_memory_bytes", node.free_memory_bytes},
          {"bandwidth_gbs", node.bandwidth_gbs},
          {"matmul_gflops", node.matmul_gflops},
          {"total_memory_bytes", node.total_memory_bytes},
          {"unified_memory", node.unified_memory},
          {"devices", devices_to_json(node.devices)}};
}

NodeProfile node_profile_from_json(const nlohmann::json& j, const std::string& where) {
  NodeProfile node;
  node.name = get_string(j, "name", where);
  node.address = get_string(j, "address", where);
  const int64_t cores = get_int(j, "cores", where);
  if (cores < 1 || cores > (1 << 20)) bad_field("cores", where, "must be between 1 and 2^20");
  node.cores = static_cast<int>(cores);
  node.free_memory_bytes = get_uint(j, "free_memory_bytes", where);
  node.bandwidth_gbs = get_double(j, "bandwidth_gbs", where);
  if (!(node.bandwidth_gbs > 0)) bad_field("bandwidth_gbs", where, "must be positive");
  node.matmul_gflops = get_double(j, "matmul_gflops", where);
  if (node.matmul_gflops < 0) bad_field("matmul_gflops", where, "must not be negative");
  if (j.contains("total_memory_bytes"))
    node.total_memory_bytes = get_uint(j, "total_memory_bytes", where);
  if (j.contains("unified_memory")) node.unified_memory = get_bool(j, "unified_memory", where);
  if (j.contains("devices")) node.devices = devices_from_json(j.at("devices"), where);
  return node;
}

std::vector<NodeProfile> node_profiles_from_text(std::string_view text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error("plan", "node profile '" + origin + "': bad JSON: " + e.what());
  }
  std::vector<NodeProfile> nodes;
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      nodes.push_back(
          node_profile_from_json(j[i], "node profile '" + origin + "'[" + std::to_string(i) + "]"));
    }
  } else {
    nodes.push_back(node_profile_from_json(j, "node profile '" + origin + "'"));
  }
  return nodes;
}

}  // namespace herd
