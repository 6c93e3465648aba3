// Unified memory (Apple Silicon): the share of it a model may use, with injected numbers,
// as the planner, the table and the profile JSON see it.
#include <gtest/gtest.h>

#include "plan/node_profile.h"
#include "plan/plan_table.h"
#include "plan/planner.h"
#include "plan/rank_memory.h"
#include "util/error.h"

namespace herd {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

NodeProfile mac(std::string name, uint64_t total_gib, uint64_t free_gib) {
  NodeProfile n;
  n.name = std::move(name);
  n.address = n.name == "local" ? "local" : n.name + ":7070";
  n.cores = 12;
  n.free_memory_bytes = free_gib * kGiB;
  n.bandwidth_gbs = 273;
  n.total_memory_bytes = total_gib * kGiB;
  n.unified_memory = true;
  return n;
}

PlanModel llama_8b_like(int64_t n_layer) {
  HParams hp;
  hp.n_vocab = 32000;
  hp.n_embd = 4096;
  hp.n_ff = 14336;
  hp.n_layer = n_layer;
  hp.n_head = 32;
  hp.n_head_kv = 8;
  hp.head_dim = hp.head_dim_v = hp.n_rot = 128;
  hp.n_ctx = 4096;
  return synthetic_plan_model(*find_arch("llama"), hp, TensorType::Q4_K);
}

TEST(UnifiedMemory, SystemKeepsTheLargerOfFourGibAndAQuarter) {
  EXPECT_EQ(unified_model_limit(8 * kGiB), 4 * kGiB);  // 4 GiB > 25% of 8
  EXPECT_EQ(unified_model_limit(16 * kGiB), 12 * kGiB);
  EXPECT_EQ(unified_model_limit(24 * kGiB), 18 * kGiB);
  EXPECT_EQ(unified_model_limit(48 * kGiB), 36 * kGiB);
  EXPECT_EQ(unified_model_limit(192 * kGiB), 144 * kGiB);
  EXPECT_EQ(unified_model_limit(4 * kGiB), 0u);
  EXPECT_EQ(unified_model_limit(3 * kGiB), 0u);
  EXPECT_EQ(unified_model_limit(0), 0u);
}

TEST(UnifiedMemory, UsableIsTheSmallerOfFreeTimesHeadroomAndTheLimit) {
  PlanOptions o;
  o.memory_headroom = 0.9;
  // Nearly all of it free (a freshly started Mac): the unified limit decides.
  EXPECT_EQ(usable_memory(mac("a", 48, 46), o), 36 * kGiB);
  // Little free: free x headroom decides, as on any machine.
  EXPECT_EQ(usable_memory(mac("a", 48, 20), o), static_cast<uint64_t>(20 * kGiB * 0.9));
  // The same numbers on a machine without unified memory: free x headroom only.
  NodeProfile pc = mac("pc", 48, 46);
  pc.unified_memory = false;
  EXPECT_EQ(usable_memory(pc, o), static_cast<uint64_t>(46 * kGiB * 0.9));
  // Unified but the total unknown (an old node's profile): free x headroom.
  NodeProfile unknown = mac("u", 48, 46);
  unknown.total_memory_bytes = 0;
  EXPECT_EQ(usable_memory(unknown, o), static_cast<uint64_t>(46 * kGiB * 0.9));
}

TEST(UnifiedMemory, PlannerKeepsAModelWithinTheLimit) {
  // An 8B-shaped llama in Q4_K (~5 GiB with its KV cache). An 8 GiB Mac with 7.5 GiB free
  // may give it 4 GiB: it does not fit, though 90% of the free memory (6.75 GiB) would
  // have held it on a PC. A 16 GiB Mac may give it 12 GiB: it fits.
  const PlanModel m = llama_8b_like(32);
  const Plan whole = plan(m, {mac("local", 16, 15)}, PlanOptions{});
  ASSERT_EQ(whole.stages.size(), 1u);
  const uint64_t bytes = whole.stages[0].ranks[0].memory_bytes;
  ASSERT_GT(bytes, 4 * kGiB) << "the test model must not fit in 4 GiB";
  ASSERT_LT(bytes, 6 * kGiB) << "the test model must fit in 6.75 GiB";
  NodeProfile small = mac("local", 8, 7);
  small.free_memory_bytes += kGiB / 2;
  EXPECT_THROW(plan(m, {small}, PlanOptions{}), Error);
  small.unified_memory = false;
  EXPECT_NO_THROW(plan(m, {small}, PlanOptions{}));
}

TEST(UnifiedMemory, TableSaysWhatTheModelMayUse) {
  const PlanModel m = llama_8b_like(8);
  const std::vector<NodeProfile> nodes = {mac("local", 48, 40)};
  const PlanOptions o;
  const std::string table = plan_table(plan(m, nodes, o), m, nodes, o);
  EXPECT_NE(table.find("memory: local: 48.00 GiB unified, 36.00 GiB usable by the model"),
            std::string::npos)
      << table;
  NodeProfile pc = nodes[0];
  pc.unified_memory = false;
  EXPECT_EQ(plan_table(plan(m, {pc}, o), m, {pc}, o).find("unified"), std::string::npos);
}

TEST(UnifiedMemory, ProfileJsonCarriesItAndOldProfilesStillRead) {
  const NodeProfile a = mac("a", 64, 50);
  EXPECT_EQ(node_profiles_from_text(to_json(a).dump(), "a.json"), std::vector<NodeProfile>{a});
  nlohmann::json old = to_json(a);
  old.erase("total_memory_bytes");
  old.erase("unified_memory");
  const NodeProfile read = node_profiles_from_text(old.dump(), "old.json").at(0);
  EXPECT_EQ(read.total_memory_bytes, 0u);
  EXPECT_FALSE(read.unified_memory);
  nlohmann::json bad = to_json(a);
  bad["unified_memory"] = "yes";
  EXPECT_THROW(node_profiles_from_text(bad.dump(), "bad.json"), Error);
}

}  // namespace
}  // namespace herd
