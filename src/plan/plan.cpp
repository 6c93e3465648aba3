#include "plan/plan.h"

#include <charconv>

#include "plan/json_fields.h"
#include "util/error.h"

namespace herd {

using namespace json_fields;

namespace {

// "P" of "pipeline:P" as a count in [1, 4096].
int parse_count(std::string_view text, std::string_view whole) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 4096) {
    throw Error("plan", "--parallel '" + std::string(whole) + "': '" + std::string(text) +
                            "' is not a count between 1 and 4096");
  }
  return value;
}

nlohmann::json range(int64_t begin, int64_t end) {
  return nlohmann::json::array({begin, end});
}

nlohmann::json rank_to_json(const Rank& r) {
  return {{"node", r.node},
          {"embedding", r.embedding},
          {"heads", range(r.head_begin, r.head_end)},
          {"kv_heads", range(r.kv_head_begin, r.kv_head_end)},
          {"ff", range(r.ff_begin, r.ff_end)},
          {"experts", r.experts},
          {"vocab", range(r.vocab_begin, r.vocab_end)},
          {"memory_bytes", r.memory_bytes},
          {"device", r.device},
          {"placement", r.placement},
          {"device_layers", r.device_layers}};
}

std::vector<int64_t> int_array(const nlohmann::json& j, std::string_view key,
                               const std::string& where) {
  std::vector<int64_t> values;
  for (const nlohmann::json& v : get_array(j, key, where)) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      bad_field(key, where, "holds something other than non-negative integers");
    }
    values.push_back(v.get<int64_t>());
  }
  return values;
}

Rank rank_from_json(const nlohmann::json& j, const std::string& where) {
  Rank r;
  const int64_t node = get_int(j, "node", where);
  if (node < 0 || node > (1 << 20)) bad_field("node", where, "is not a node index");
  r.node = static_cast<int>(node);
  r.embedding = get_bool(j, "embedding", where);
  std::tie(r.head_begin, r.head_end) = get_range(j, "heads", where);
  std::tie(r.kv_head_begin, r.kv_head_end) = get_range(j, "kv_heads", where);
  std::tie(r.ff_begin, r.ff_end) = get_range(j, "ff", where);
  r.experts = int_array(j, "experts", where);
  std::tie(r.vocab_begin, r.vocab_end) = get_range(j, "vocab", where);
  r.memory_bytes = get_uint(j, "memory_bytes", where);
  // Plans written before ranks had devices have none: the CPU.
  if (j.contains("device")) r.device = get_string(j, "device", where);
  if (j.contains("placement")) {
    r.placement = get_string(j, "placement", where);
    if (r.placement != "" && r.placement != "device" && r.placement != "experts-on-cpu" &&
        r.placement != "first-layers") {
      bad_field("placement", where, "must be device, experts-on-cpu or first-layers");
    }
  }
  if (j.contains("device_layers")) {
    r.device_layers = get_int(j, "device_layers", where);
    if (r.device_layers < 0) bad_field("device_layers", where, "must not be negative");
  }
  return r;
}

Stage stage_from_json(const nlohmann::json& j, const std::string& where) {
  Stage s;
  std::tie(s.layer_begin, s.layer_end) = get_range(j, "layers", where);
  s.embedding = get_bool(j, "embedding", where);
  s.output = get_bool(j, "output", where);
  const nlohmann::json& ranks = get_array(j, "ranks", where);
  for (size_t i = 0; i < ranks.size(); ++i) {
    s.ranks.push_back(rank_from_json(ranks[i], where + ".ranks[" + std::to_string(i) + "]"));
  }
  s.shared_kv_heads = int_array(j, "shared_kv_heads", where);
  return s;
}

}  // namespace

void parse_parallel(std::string_view text, PlanOptions& options) {
  if (text == "auto") {
    options.mode = PlanOptions::Mode::kAuto;
    return;
  }
  if (text == "pipeline") {
    options.mode = PlanOptions::Mode::kPipeline;
    return;
  }
  if (text == "tensor") {
    options.mode = PlanOptions::Mode::kTensor;
    return;
  }
  int stages = 1, ranks = 1;
  bool seen_pipeline = false, seen_tensor = false;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma - start);
    if (item.substr(0, 9) == "pipeline:" && !seen_pipeline) {
      stages = parse_count(item.substr(9), text);
      seen_pipeline = true;
    } else if (item.substr(0, 7) == "tensor:" && !seen_tensor) {
      ranks = parse_count(item.substr(7), text);
      seen_tensor = true;
    } else {
      throw Error("plan", "--parallel '" + std::string(text) +
                              "' is not auto, pipeline, tensor or pipeline:P,tensor:T");
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  options.mode = PlanOptions::Mode::kHybrid;
  options.pipeline_stages = stages;
  options.tensor_ranks = ranks;
}

PlanOptions::MoeMode parse_moe_mode(std::string_view text) {
  if (text == "auto") return PlanOptions::MoeMode::kAuto;
  if (text == "expert-parallel") return PlanOptions::MoeMode::kExpertParallel;
  if (text == "split-experts") return PlanOptions::MoeMode::kSplitExperts;
  throw Error("plan",
              "--moe '" + std::string(text) + "' is not auto, expert-parallel or split-experts");
}

nlohmann::json to_json(const Plan& plan) {
  nlohmann::json stages = nlohmann::json::array();
  for (const Stage& s : plan.stages) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const Rank& r : s.ranks) ranks.push_back(rank_to_json(r));
    stages.push_back({{"layers", range(s.layer_begin, s.layer_end)},
                      {"embedding", s.embedding},
                      {"output", s.output},
                      {"ranks", std::move(ranks)},
                      {"shared_kv_heads", s.shared_kv_heads}});
  }
  return {{"parallel", plan.parallel},   {"moe", plan.moe},
          {"n_ctx", plan.n_ctx},         {"n_seq", plan.n_seq},
          {"stages", std::move(stages)}, {"notes", plan.notes}};
}

Plan plan_from_json(const nlohmann::json& j) {
  const std::string where = "plan";
  Plan plan;
  plan.parallel = get_string(j, "parallel", where);
  plan.moe = get_string(j, "moe", where);
  plan.n_ctx = get_int(j, "n_ctx", where);
  plan.n_seq = get_int(j, "n_seq", where);
  if (plan.n_ctx < 1) bad_field("n_ctx", where, "must be positive");
  if (plan.n_seq < 1) bad_field("n_seq", where, "must be positive");
  const nlohmann::json& stages = get_array(j, "stages", where);
  for (size_t i = 0; i < stages.size(); ++i) {
    plan.stages.push_back(stage_from_json(stages[i], where + ".stages[" + std::to_string(i) + "]"));
  }
  for (const nlohmann::json& note : get_array(j, "notes", where)) {
    if (!note.is_string()) bad_field("notes", where, "holds something other than strings");
    plan.notes.push_back(note.get<std::string>());
  }
  return plan;
}

}  // namespace herd
