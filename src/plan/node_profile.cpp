#include "plan/node_profile.h"

#include "plan/json_fields.h"
#include "util/error.h"

namespace herd {

using namespace json_fields;

nlohmann::json to_json(const NodeProfile& node) {
  return {{"name", node.name},
          {"address", node.address},
          {"cores", node.cores},
          {"free_memory_bytes", node.free_memory_bytes},
          {"bandwidth_gbs", node.bandwidth_gbs},
          {"matmul_gflops", node.matmul_gflops},
          {"total_memory_bytes", node.total_memory_bytes},
          {"unified_memory", node.unified_memory}};
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
