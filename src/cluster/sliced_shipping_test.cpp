// A tensor-parallel rank is shipped only its cut of each weight. For shared models and the
// planner's slices over 2 and 3 uneven ranks, each rank's assignment goes through the real
// ship_weights / receive_weights (in-process loopback) into its own file; every rank
// loaded from its file gives logits bit-identical to the same rank loaded from the whole
// model file, and the bytes shipped are exactly the rank's cuts (computed here from the
// plan's ranges, apart from the model's table) plus what every rank holds whole.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster/assignment.h"
#include "cluster/shipping.h"
#include "cluster/weight_cache.h"
#include "engine/shard.h"
#include "engine/shared_memory_sum.h"
#include "gguf/writer.h"
#include "net/loopback.h"
#include "plan/plan_model.h"
#include "plan/planner.h"
#include "plan/shard_spec.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/temp_dir.h"

namespace herd::cluster {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kCtx = 32;

struct Case {
  std::string model;
  int n_ranks;
  PlanOptions::MoeMode moe = PlanOptions::MoeMode::kAuto;
};

std::string case_name(const Case& c) {
  const char* moe = c.moe == PlanOptions::MoeMode::kExpertParallel ? " expert-parallel"
                    : c.moe == PlanOptions::MoeMode::kSplitExperts ? " split-experts"
                                                                   : "";
  return c.model + " T" + std::to_string(c.n_ranks) + moe;
}

// One stage of n_ranks nodes of uneven bandwidth, so that the ranks' shares differ.
Plan tensor_plan(const gguf::File& file, const ModelInfo& info, const Case& c) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  const double bandwidths[] = {10, 30, 20};
  std::vector<NodeProfile> nodes;
  for (int i = 0; i < c.n_ranks; ++i) {
    nodes.push_back({"n" + std::to_string(i), "n" + std::to_string(i) + ":7000", 1, 4 * kGiB,
                     bandwidths[i], 0});
  }
  PlanOptions options;
  options.mode = PlanOptions::Mode::kTensor;
  options.moe = c.moe;
  options.n_ctx = kCtx;
  return herd::plan(plan_model_from(info, file), nodes, options);
}

// Bytes of rank r's part of tensor t, written out from the plan's ranges.
uint64_t expected_bytes(const gguf::TensorInfo& t, const Rank& r, const HParams& hp) {
  const std::string_view name = t.name;
  auto is = [&](std::string_view suffix) { return name.ends_with(suffix); };
  const int64_t heads = r.head_end - r.head_begin;
  const int64_t q_rows = heads * hp.head_dim, o_cols = heads * hp.head_dim_v;
  const int64_t kv_rows = (r.kv_head_end - r.kv_head_begin) * hp.head_dim;
  const int64_t ff = r.ff_end - r.ff_begin;
  const uint64_t row = row_bytes(t.type, t.shape[0]);
  const auto rows = [](int64_t n) { return static_cast<uint64_t>(n); };
  const uint64_t experts = hp.n_expert > 0 ? r.experts.size() : 1;
  // The range counts an expert's rows: a dense layer of an MoE model (deepseek2's first)
  // and the shared experts are cut in proportion.
  const int64_t dense_ff = hp.n_expert > 0 ? ff * (hp.n_ff / hp.n_ff_expert) : ff;
  const int64_t shared_ff = ff * hp.n_expert_shared;
  if (is("attn_q.weight") || is("attn_q_b.weight")) return rows(q_rows) * row;
  if (is("attn_k.weight") || is("attn_v.weight")) return rows(kv_rows) * row;
  // MLA: per head, k_nope and v rows of attn_kv_b, kv_lora rows of attn_k_b, v of attn_v_b.
  if (is("attn_kv_b.weight")) return rows(heads * (hp.head_dim - hp.n_rot + hp.head_dim_v)) * row;
  if (is("attn_k_b.weight")) return rows(heads * hp.kv_lora_rank) * row;
  if (is("attn_v_b.weight")) return rows(o_cols) * row;
  if (is("attn_output.weight")) return rows(t.shape[1]) * row_bytes(t.type, o_cols);
  if (is("attn_q.bias")) return row_bytes(t.type, q_rows);
  if (is("attn_k.bias") || is("attn_v.bias")) return row_bytes(t.type, kv_rows);
  if (is("attn_sinks.weight")) return row_bytes(t.type, heads);
  if (is("ffn_gate.weight") || is("ffn_up.weight")) return rows(dense_ff) * row;
  if (is("ffn_down.weight")) return rows(t.shape[1]) * row_bytes(t.type, dense_ff);
  if (is("ffn_gate_shexp.weight") || is("ffn_up_shexp.weight")) return rows(shared_ff) * row;
  if (is("ffn_down_shexp.weight")) return rows(t.shape[1]) * row_bytes(t.type, shared_ff);
  if (is("ffn_gate_exps.weight") || is("ffn_up_exps.weight")) return experts * rows(ff) * row;
  if (is("ffn_down_exps.weight")) return experts * rows(t.shape[1]) * row_bytes(t.type, ff);
  // gpt-oss: a bias row per expert, [ff, n_expert] cut like the experts' rows.
  if (is("ffn_gate_exps.bias") || is("ffn_up_exps.bias")) return experts * row_bytes(t.type, ff);
  if (is("ffn_down_exps.bias")) return experts * row;
  if (name == "output.weight") return rows(r.vocab_end - r.vocab_begin) * row;
  return t.n_bytes;  // norms, routers, q/k norms, token_embd, attn_output.bias: whole
}

// The model's metadata as ship_weights sends it: the GGUF header of no tensors.
uint64_t metadata_bytes(const gguf::File& file, const ModelInfo& info, const Assignment& a) {
  gguf::Writer writer(file.alignment());
  for (const auto& [key, value] : file.metadata()) writer.set_value(key, value);
  write_slice_metadata(writer, a.shard.slice, info.hp.n_vocab);
  return writer.header().size();
}

net::LoopbackPair connected_pair() {
  net::LoopbackPair pair = net::make_loopback_pair("coordinator", "node");
  pair.a->finish_handshake("coordinator", net::FrameLimits{});
  pair.b->finish_handshake("node", net::FrameLimits{});
  return pair;
}

std::vector<int32_t> first_tokens(const std::string& model, size_t n) {
  std::istringstream in(read_file("../shared/models/" + model + ".0.tokens"));
  std::vector<int32_t> ids;
  for (int32_t id; ids.size() < n && in >> id;) ids.push_back(id);
  return ids;
}

// Runs the batches through the ranks, each in its own thread, summing in shared memory.
// Returns [rank][batch] logits of the rank's vocabulary rows.
std::vector<std::vector<std::vector<float>>> run_ranks(std::vector<engine::Shard>& ranks,
                                                       const std::vector<engine::Batch>& batches) {
  const int n = static_cast<int>(ranks.size());
  engine::SharedMemorySum shared(n);
  std::vector<std::vector<std::vector<float>>> outputs(ranks.size());
  std::vector<std::string> errors(ranks.size());
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      const size_t r = static_cast<size_t>(i);
      try {
        ThreadPool pool(1);
        engine::SharedMemoryRank sum(shared, i);
        for (const engine::Batch& batch : batches) {
          outputs[r].emplace_back();
          ranks[r].forward(batch, nullptr, outputs[r].back(), pool, &sum);
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return outputs;
}

void ship_and_compare(const Case& c) {
  const gguf::File file = gguf::File::open("../shared/models/" + c.model + ".gguf");
  const ModelInfo info = read_model_info(file);
  const Plan plan = tensor_plan(file, info, c);
  ASSERT_EQ(plan.stages.size(), 1u);
  const Stage& stage = plan.stages[0];
  ASSERT_EQ(stage.ranks.size(), static_cast<size_t>(c.n_ranks));
  const TempDir dir("sliced-shipping-test", c.model + std::to_string(c.n_ranks));

  engine::ShardOptions options;
  options.n_ctx = kCtx;
  options.isa = kernels::best_isa(kernels::detect_cpu());
  std::vector<gguf::File> rank_files;
  std::vector<ModelInfo> rank_infos;
  std::vector<engine::Shard> from_whole, from_cut;
  for (int r = 0; r < c.n_ranks; ++r) {
    const Assignment a = assignment_for(plan, 0, r, file, info, net::WireDType::F32);
    const fs::path path = dir.path() / ("rank" + std::to_string(r) + ".gguf");
    net::LoopbackPair pair = connected_pair();
    auto sent =
        std::async(std::launch::async, [&] { return ship_weights(*pair.b, file, info, a); });
    const ShipStats got = receive_weights(*pair.a, a, path, net::Millis(20000));
    const ShipStats shipped = sent.get();
    EXPECT_EQ(got.bytes, shipped.bytes);

    // Exactly the rank's cuts, and the model's metadata with the slice it holds.
    uint64_t expected = 0;
    for (const gguf::TensorInfo& t : file.tensors())
      expected += expected_bytes(t, stage.ranks[r], info.hp);
    EXPECT_EQ(tensor_bytes(a), expected) << "rank " << r;
    EXPECT_EQ(shipped.bytes, expected + metadata_bytes(file, info, a)) << "rank " << r;
    std::printf("[ sliced   ] %s rank %d: shipped %.2f MB of the model's %.2f MB\n",
                case_name(c).c_str(), r, shipped.bytes / 1e6, file.bytes().size() / 1e6);

    rank_files.push_back(gguf::File::open(path.string()));
    rank_infos.push_back(read_model_info(rank_files.back(), /*partial=*/true));
    ASSERT_TRUE(rank_infos.back().file_slice.has_value());
    EXPECT_EQ(*rank_infos.back().file_slice, a.shard.slice);
    from_whole.push_back(engine::Shard::load(file, info, a.shard, options));
    from_cut.push_back(engine::Shard::load(rank_files.back(), rank_infos.back(), a.shard, options));
    // A file cut for this slice is packed as it is: no column copies out of it.
    EXPECT_LE(from_cut.back().packed_weight_bytes(), from_whole.back().packed_weight_bytes());
  }

  // A prompt in one batch, then two single-token steps.
  const std::vector<int32_t> prompt = first_tokens(c.model, 8);
  std::vector<engine::Batch> batches(3);
  for (size_t i = 0; i < prompt.size(); ++i)
    batches[0].add(prompt[i], 0, static_cast<int32_t>(i), true);
  batches[1].add(prompt[1], 0, static_cast<int32_t>(prompt.size()), true);
  batches[2].add(prompt[2], 0, static_cast<int32_t>(prompt.size() + 1), true);
  const auto want = run_ranks(from_whole, batches);
  const auto got = run_ranks(from_cut, batches);
  for (size_t r = 0; r < want.size(); ++r) {
    for (size_t b = 0; b < batches.size(); ++b) {
      ASSERT_EQ(got[r][b].size(), want[r][b].size()) << "rank " << r << " batch " << b;
      EXPECT_EQ(std::memcmp(got[r][b].data(), want[r][b].data(), want[r][b].size() * sizeof(float)),
                0)
          << "rank " << r << " batch " << b;
    }
  }
}

TEST(SlicedShipping, EachRankIsShippedItsCutAndLoadsItBitForBit) {
  const Case cases[] = {{"llama-q4_0", 2},
                        {"llama-q4_0", 3},
                        {"llama-q4_k_m", 2},
                        {"qwen2-f32", 3},
                        {"qwen3-f16", 2},
                        {"qwen3moe-f32", 2, PlanOptions::MoeMode::kExpertParallel},
                        {"qwen3moe-f16", 3, PlanOptions::MoeMode::kSplitExperts}};
  for (const Case& c : cases) {
    SCOPED_TRACE(case_name(c));
    ship_and_compare(c);
  }
}

// The frontier architectures: MLA's attn_q_b, attn_kv_b, attn_k_b and attn_v_b cut by head,
// the dense first layer and shared experts of deepseek2 in proportion to the FFN range,
// gpt-oss's sinks by head and its [ff, n_expert] expert biases by expert and row.
TEST(SlicedShipping, FrontierRanksAreShippedTheirCutsAndLoadThemBitForBit) {
  const Case cases[] = {{"frontier/deepseek2-f32", 2, PlanOptions::MoeMode::kExpertParallel},
                        {"frontier/deepseek2-f32", 3, PlanOptions::MoeMode::kSplitExperts},
                        {"frontier/gemma3-f32", 3},
                        {"frontier/gpt-oss-f32", 2, PlanOptions::MoeMode::kExpertParallel},
                        {"frontier/gpt-oss-f32", 3, PlanOptions::MoeMode::kSplitExperts}};
  for (const Case& c : cases) {
    SCOPED_TRACE(case_name(c));
    ship_and_compare(c);
  }
}

// A rank whose slice holds none of a weight is not shipped that tensor at all (a GGUF
// tensor has no empty dimension). deepseek2-q8_0 gives such ranks: with 2 split-experts
// ranks one holds no FFN rows (an expert's 32 rows are one q8_0 block of ffn_down_exps),
// with 3 expert-parallel ranks two hold no heads. Their cut files load: a rank without
// heads looks up no MLA tensor, and the dense layer's and shared experts' cuts come from
// the model's tensor list, not the file's.
TEST(SlicedShipping, RanksWithEmptyCutsOfMlaAndSharedExpertsLoad) {
  const Case cases[] = {{"frontier/deepseek2-q8_0", 2, PlanOptions::MoeMode::kSplitExperts},
                        {"frontier/deepseek2-q8_0", 3, PlanOptions::MoeMode::kExpertParallel}};
  for (const Case& c : cases) {
    SCOPED_TRACE(case_name(c));
    // Each case, even when the one before threw.
    EXPECT_NO_THROW(ship_and_compare(c));
  }
}

TEST(SlicedShipping, ACachedCutIsRefusedForAnotherSlice) {
  const Case c{"llama-q4_0", 2};
  const gguf::File file = gguf::File::open("../shared/models/" + c.model + ".gguf");
  const ModelInfo info = read_model_info(file);
  const Plan plan = tensor_plan(file, info, c);
  const Assignment rank0 = assignment_for(plan, 0, 0, file, info, net::WireDType::F32);
  const Assignment rank1 = assignment_for(plan, 0, 1, file, info, net::WireDType::F32);
  // Each rank's cut has its own place in the cache, apart from the whole tensors.
  const TempDir dir("sliced-shipping-test", "other-slice");
  Assignment whole = rank0;
  whole.shard.slice = {};
  EXPECT_NE(shard_cache_path(dir, {1, 2}, rank0), shard_cache_path(dir, {1, 2}, rank1));
  EXPECT_NE(shard_cache_path(dir, {1, 2}, rank0), shard_cache_path(dir, {1, 2}, whole));
  const fs::path path = dir / "rank0.gguf";
  net::LoopbackPair pair = connected_pair();
  auto sent =
      std::async(std::launch::async, [&] { return ship_weights(*pair.b, file, info, rank0); });
  receive_weights(*pair.a, rank0, path, net::Millis(20000));
  sent.get();
  const gguf::File cut = gguf::File::open(path.string());
  const ModelInfo cut_info = read_model_info(cut, /*partial=*/true);
  engine::ShardOptions options;
  options.n_ctx = kCtx;
  try {
    engine::Shard::load(cut, cut_info, rank1.shard, options);
    FAIL() << "rank 1 loaded from rank 0's file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the file holds rows"), std::string::npos) << e.what();
  }
  // A node told to run rank 1 refuses metadata that says rank 0's slice.
  Assignment mislabeled = rank1;
  mislabeled.tensors = rank0.tensors;
  net::LoopbackPair again = connected_pair();
  auto sent_again = std::async(std::launch::async, [&] {
    try {
      ship_weights(*again.b, file, info, rank0);
    } catch (const Error&) {
      // The node may close first.
    }
  });
  try {
    receive_weights(*again.a, mislabeled, dir / "mislabeled.gguf", net::Millis(20000));
    FAIL() << "a slice other than the assignment's was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not the assignment's"), std::string::npos) << e.what();
  }
  again.a->close();
  sent_again.get();
  EXPECT_FALSE(fs::exists(dir / "mislabeled.gguf"));
}

}  // namespace
}  // namespace herd::cluster
