// GET /api/cluster's one-node view and the figures added to every status.
#include "server/cluster_view.h"

#include <gtest/gtest.h>

namespace herd::server {
namespace {

using json = nlohmann::json;

json local_node_info() {
  return {{"name", "local"},
          {"arch", "qwen3"},
          {"layers", {{"first", 0}, {"end", 4}, {"total", 4}}},
          {"n_head", 8},
          {"n_head_kv", 2},
          {"n_ff", 768},
          {"n_vocab", 1000},
          {"n_ctx", 4096},
          {"slots", 2},
          {"weight_bytes", 1000},
          {"packed_weight_bytes", 200},
          {"kv_cache_bytes", 30},
          {"threads", 2},
          {"cores", 4},
          {"isa", "avx2"}};
}

TEST(ClusterView, SingleNodeHasTheDocumentedKeys) {
  json s = single_node_status(local_node_info(), {.batches = 3, .tokens = 40, .seconds = 0.5});
  for (const char* key :
       {"state", "reason", "parallel", "plan", "nodes", "stages", "forward_seconds", "events"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s["state"], "ok");
  EXPECT_EQ(s["parallel"], "single");
  ASSERT_EQ(s["nodes"].size(), 1u);
  EXPECT_EQ(s["nodes"][0]["name"], "local");
  EXPECT_EQ(s["nodes"][0]["state"], "up");
  EXPECT_EQ(s["nodes"][0]["cores"], 4);
  EXPECT_EQ(s["nodes"][0]["device"], "cpu");  // the node info names none: the CPU
  json on_gpu = local_node_info();
  on_gpu["device"] = "vulkan:0 Some GPU, 640 MiB";
  on_gpu["device_bytes"] = 671088640;
  const json g = single_node_status(on_gpu, {});
  EXPECT_EQ(g["nodes"][0]["device"], "vulkan:0 Some GPU, 640 MiB");
  EXPECT_EQ(g["nodes"][0]["device_bytes"], 671088640);
  ASSERT_EQ(s["plan"]["stages"].size(), 1u);
  const json& stage = s["plan"]["stages"][0];
  EXPECT_EQ(stage["layers"], json({0, 4}));
  ASSERT_EQ(stage["ranks"].size(), 1u);
  EXPECT_EQ(stage["ranks"][0]["node"], 0);
  EXPECT_EQ(stage["ranks"][0]["heads"], json({0, 8}));
  EXPECT_EQ(stage["ranks"][0]["kv_heads"], json({0, 2}));
  EXPECT_EQ(stage["ranks"][0]["ff"], json({0, 768}));
  EXPECT_EQ(stage["ranks"][0]["vocab"], json({0, 1000}));
  EXPECT_EQ(stage["ranks"][0]["memory_bytes"], 1230);
  ASSERT_EQ(s["stages"].size(), 1u);
  EXPECT_EQ(s["stages"][0]["tokens"], 40);
  EXPECT_EQ(s["stages"][0]["batches"], 3);
  EXPECT_DOUBLE_EQ(s["stages"][0]["compute_seconds"].get<double>(), 0.5);
  EXPECT_TRUE(s["events"].empty());
}

TEST(ClusterView, DerivedFigures) {
  json s = {
      {"plan",
       {{"stages",
         {{{"ranks", {{{"node", 1}, {"memory_bytes", 100}}, {{"node", 2}, {"memory_bytes", 50}}}}},
          {{"ranks", {{{"node", 1}, {"memory_bytes", 7}}}}}}}}},
      {"nodes", {{{"index", 0}}, {{"index", 1}}, {{"index", 2}}}},
      {"stages",
       {{{"tokens", 200}, {"compute_seconds", 0.5}, {"busy_seconds", 1.0}},
        {{"tokens", 0}, {"compute_seconds", 0}, {"busy_seconds", 0}}}}};
  add_derived_figures(s);
  EXPECT_EQ(s["nodes"][0]["memory_used_bytes"], 0);
  EXPECT_EQ(s["nodes"][1]["memory_used_bytes"], 107);
  EXPECT_EQ(s["nodes"][2]["memory_used_bytes"], 50);
  EXPECT_DOUBLE_EQ(s["stages"][0]["ms_per_token"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(s["stages"][0]["busy_ms_per_token"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(s["stages"][0]["tokens_per_second"].get<double>(), 400.0);
  EXPECT_DOUBLE_EQ(s["stages"][1]["ms_per_token"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(s["stages"][1]["tokens_per_second"].get<double>(), 0.0);
}

TEST(ClusterView, OtherShapesPassUnchanged) {
  json s = {{"state", "loading"}, {"nodes", json::array()}, {"plan", nullptr}};
  const json before = s;
  add_derived_figures(s);
  EXPECT_EQ(s, before);
  json odd = json::array({1, 2});
  add_derived_figures(odd);
  EXPECT_EQ(odd, json::array({1, 2}));
}

}  // namespace
}  // namespace herd::server
