// The placement of a part over a node's GPU and CPU in the assignment (LOAD.plan_json): what
// the plan says travels, and hostile values are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "cluster/assignment.h"
#include "util/error.h"

namespace herd::cluster {
namespace {

using ::testing::HasSubstr;

TEST(AssignmentTest, ThePlannedPlacementTravelsAndIsChecked) {
  Assignment a;
  a.shard.layer_end = 4;
  a.n_ctx = 8;
  a.device = "vulkan:0";
  nlohmann::json j = to_json(a);
  EXPECT_FALSE(j.contains("placement"));  // all on the device: as before
  EXPECT_EQ(assignment_from_json(j).placement, "device");
  a.placement = "experts-on-cpu";
  EXPECT_EQ(assignment_from_json(to_json(a)).placement, "experts-on-cpu");
  a.placement = "first-layers";
  a.device_layers = 3;
  const Assignment b = assignment_from_json(to_json(a));
  EXPECT_EQ(b.placement, "first-layers");
  EXPECT_EQ(b.device_layers, 3);
  const auto refused = [&](const char* what, const char* field,
                           const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json bad = to_json(a);
    edit(bad);
    try {
      assignment_from_json(bad);
      ADD_FAILURE() << what << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(field)) << what;
    }
  };
  refused("a number", "placement", [](nlohmann::json& x) { x["placement"] = 1; });
  refused("an unknown placement", "placement", [](nlohmann::json& x) { x["placement"] = "gpu"; });
  refused("a long placement", "placement",
          [](nlohmann::json& x) { x["placement"] = std::string(100000, 'x'); });
  refused("no device_layers", "device_layers", [](nlohmann::json& x) { x.erase("device_layers"); });
  refused("device_layers 0", "device_layers", [](nlohmann::json& x) { x["device_layers"] = 0; });
  refused("every layer on the device", "device_layers",
          [](nlohmann::json& x) { x["device_layers"] = 4; });
  refused("device_layers -1", "device_layers", [](nlohmann::json& x) { x["device_layers"] = -1; });
  refused("device_layers a string", "device_layers",
          [](nlohmann::json& x) { x["device_layers"] = "2"; });
  refused("device_layers beside experts-on-cpu", "device_layers",
          [](nlohmann::json& x) { x["placement"] = "experts-on-cpu"; });
  refused("device_layers without a placement", "device_layers",
          [](nlohmann::json& x) { x.erase("placement"); });
  refused("a split on the CPU", "placement", [](nlohmann::json& x) { x["device"] = "cpu"; });
  refused("a split tensor-parallel rank", "placement", [](nlohmann::json& x) {
    x["n_ranks"] = 2;
    x["ring"]["next"] = x["ring"]["prev"] = "127.0.0.1:1";
  });
}

TEST(AssignmentTest, AOneRankStageGetsThePlannedSplit) {
  const gguf::File file = gguf::File::open("../shared/models/llama-q4_0.gguf");
  const ModelInfo info = read_model_info(file);
  ASSERT_GE(info.hp.n_layer, 2);
  Plan plan;  // one stage on node 1 (--no-local), its first layer on the node's GPU
  plan.n_ctx = 64;
  plan.n_seq = 1;
  Stage stage{0, info.hp.n_layer, true, true, {}, {}};
  Rank rank;
  rank.node = 1;
  rank.embedding = true;
  rank.device = "vulkan:0";
  rank.placement = "first-layers";
  rank.device_layers = 1;
  stage.ranks = {rank};
  plan.stages = {stage};
  const Assignment a = assignment_for(plan, 0, 0, file, info, net::WireDType::F32);
  EXPECT_EQ(a.device, "vulkan:0");
  EXPECT_EQ(a.placement, "first-layers");
  EXPECT_EQ(a.device_layers, 1);
  const Assignment back = assignment_from_json(to_json(a));
  EXPECT_EQ(back.placement, "first-layers");
  EXPECT_EQ(back.device_layers, 1);
  // The coordinator's own ranks load their part as a node does: the same split.
  plan.stages[0].ranks[0].node = 0;
  const Assignment own = assignment_for(plan, 0, 0, file, info, net::WireDType::F32);
  EXPECT_EQ(own.device, "vulkan:0");
  EXPECT_EQ(planned_placement(own).kind, engine::DevicePlacement::kFirstLayers);
  EXPECT_EQ(planned_placement(own).device_layers, 1);
  // All of it on the GPU: the device, no placement in the JSON.
  plan.stages[0].ranks[0].node = 1;
  plan.stages[0].ranks[0].placement = "device";
  const Assignment whole = assignment_for(plan, 0, 0, file, info, net::WireDType::F32);
  EXPECT_EQ(whole.device, "vulkan:0");
  EXPECT_FALSE(to_json(whole).contains("placement"));
}

}  // namespace
}  // namespace herd::cluster
