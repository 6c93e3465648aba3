// Tensor-parallel shards against the whole model: for the shared models, the real planner
// slices one stage over T = 2 and 3 ranks of uneven bandwidth; each rank's Shard runs in
// its own thread, the ranks sum their partials through an in-process all-reduce (or the
// net ring over loopback pairs), and the concatenated vocabulary slices must match the
// whole shard's logits: a prompt as one chunk, then token-by-token greedy decode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/all_reduce.h"
#include "engine/shard.h"
#include "engine/shared_memory_sum.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "net/frame.h"
#include "net/loopback.h"
#include "net/ring.h"
#include "plan/plan_check.h"
#include "plan/plan_model.h"
#include "plan/planner.h"
#include "plan/shard_spec.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace herd::engine {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr int64_t kCtx = 64;

// The net ring's collectives seen through the engine's interface (what the cluster does).
class RingRank final : public AllReduce {
 public:
  explicit RingRank(std::unique_ptr<net::RingCollectives> ring) : ring_(std::move(ring)) {}
  void sum(float* data, size_t n) override { ring_->all_reduce_sum(data, n); }

 private:
  std::unique_ptr<net::RingCollectives> ring_;
};

// p ranks over loopback pairs: link i joins rank i (its `a`) to rank i+1 (its `b`).
std::vector<std::unique_ptr<AllReduce>> ring_ranks(int p, std::vector<net::LoopbackPair>& links) {
  for (int i = 0; i < p; ++i) {
    const std::string me = "rank" + std::to_string(i);
    const std::string next = "rank" + std::to_string((i + 1) % p);
    links.push_back(net::make_loopback_pair(me, next));
    links.back().a->finish_handshake(next, net::FrameLimits{});
    links.back().b->finish_handshake(me, net::FrameLimits{});
  }
  std::vector<std::unique_ptr<AllReduce>> ranks;
  for (int i = 0; i < p; ++i) {
    auto next = links[static_cast<size_t>(i)].a;
    auto prev = links[static_cast<size_t>((i + p - 1) % p)].b;
    ranks.push_back(
        std::make_unique<RingRank>(std::make_unique<net::RingCollectives>(i, p, next, prev)));
  }
  return ranks;
}

std::vector<int32_t> read_tokens(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<int32_t> ids;
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

struct Case {
  std::string model;
  int n_ranks;  // per stage
  PlanOptions::MoeMode moe = PlanOptions::MoeMode::kAuto;
  bool ring = false;  // the net ring over loopback instead of the shared-memory sum
  int n_stages = 1;   // > 1: a hybrid plan (pipeline of tensor-parallel stages)
  int n_seq = 1;      // 2: two sequences share every batch
};

std::string case_name(const Case& c) {
  std::string name = c.model + "_T" + std::to_string(c.n_ranks);
  if (c.n_stages > 1) name += "_P" + std::to_string(c.n_stages);
  if (c.moe == PlanOptions::MoeMode::kExpertParallel) name += "_expert_parallel";
  if (c.moe == PlanOptions::MoeMode::kSplitExperts) name += "_split_experts";
  if (c.ring) name += "_ring";
  if (c.n_seq > 1) name += "_seqs" + std::to_string(c.n_seq);
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::string param_name(const ::testing::TestParamInfo<Case>& info) {
  return case_name(info.param);
}

// gtest (and so ctest) shows the case by name instead of a byte dump.
void PrintTo(const Case& c, std::ostream* out) {
  *out << case_name(c);
}

std::string describe(const Stage& stage) {
  std::ostringstream out;
  out << " layers " << stage.layer_begin << "-" << stage.layer_end << ":";
  for (const Rank& r : stage.ranks) {
    out << " [heads " << r.head_begin << "-" << r.head_end << " kv " << r.kv_head_begin << "-"
        << r.kv_head_end << " ff " << r.ff_begin << "-" << r.ff_end << " experts "
        << r.experts.size() << " vocab " << r.vocab_begin << "-" << r.vocab_end << "]";
  }
  if (!stage.shared_kv_heads.empty()) out << " (shared KV heads)";
  return out.str();
}

// Runs the batches through one stage: each rank's shard in its own thread with its own
// one-thread pool, summing through `ring` or a shared-memory all-reduce. inputs: per batch
// [n][n_embd] activations of the previous stage, or empty for the embedding stage.
// Returns [rank][batch] outputs; adds the ranks' packed weight bytes to packed_bytes.
std::vector<std::vector<std::vector<float>>> run_stage(
    const gguf::File& file, const ModelInfo& info, const ShardOptions& options, const Stage& stage,
    const std::vector<Batch>& batches, const std::vector<std::vector<float>>& inputs, bool ring,
    size_t& packed_bytes) {
  const int n_ranks = static_cast<int>(stage.ranks.size());
  // Loaded here, so that load errors surface in this thread.
  std::vector<Shard> shards;
  for (const Rank& r : stage.ranks) {
    shards.push_back(Shard::load(file, info, shard_spec(stage, r, info.arch->moe), options));
    EXPECT_TRUE(shards.back().is_sliced());
    // What the planner counts for the rank (an MLA rank caches the whole latent; a hybrid's
    // linear layers keep one recurrent state per sequence instead).
    const PlanModel pm = plan_model_from(info, file);
    const int64_t n_recurrent = pm.recurrent_layers(stage.layer_begin, stage.layer_end);
    const size_t kv_bytes_per_head =
        static_cast<size_t>(stage.layer_end - stage.layer_begin - n_recurrent) *
        static_cast<size_t>(kCtx) * pm.kv_bytes_per_head_per_token() *
        static_cast<size_t>(options.n_seq);
    const size_t kv_rows = kv_bytes_per_head * static_cast<size_t>(r.kv_head_end - r.kv_head_begin);
    if (n_recurrent == 0) {
      EXPECT_EQ(shards.back().kv_cache_bytes(), kv_rows);
    } else {  // a rank's share of the states, at most the whole (what the planner counts)
      EXPECT_GT(shards.back().kv_cache_bytes(), kv_rows);
      EXPECT_LE(shards.back().kv_cache_bytes(), kv_rows + static_cast<size_t>(n_recurrent) *
                                                              pm.recurrent_state_bytes *
                                                              static_cast<size_t>(options.n_seq));
    }
    packed_bytes += shards.back().packed_weight_bytes();
  }
  SharedMemorySum shared(n_ranks);
  std::vector<net::LoopbackPair> links;
  std::vector<std::unique_ptr<AllReduce>> reducers;
  if (ring) {
    reducers = ring_ranks(n_ranks, links);
  } else {
    for (int i = 0; i < n_ranks; ++i)
      reducers.push_back(std::make_unique<SharedMemoryRank>(shared, i));
  }
  std::vector<std::vector<std::vector<float>>> outputs(static_cast<size_t>(n_ranks));
  std::vector<std::string> errors(static_cast<size_t>(n_ranks));
  std::vector<std::thread> threads;
  for (int i = 0; i < n_ranks; ++i) {
    threads.emplace_back([&, i] {
      const size_t r = static_cast<size_t>(i);
      try {
        ThreadPool pool(1);
        for (size_t b = 0; b < batches.size(); ++b) {
          outputs[r].emplace_back();
          const float* input = inputs.empty() ? nullptr : inputs[b].data();
          shards[r].forward(batches[b], input, outputs[r].back(), pool, reducers[r].get());
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();  // the others then hang in the all-reduce: the timeout shows it
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return outputs;
}

class TensorParallel : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallel, RanksMatchTheWholeModel) {
  const Case& c = GetParam();
  const gguf::File file = gguf::File::open("../shared/models/" + c.model + ".gguf");
  const ModelInfo info = read_model_info(file);
  const HParams& hp = info.hp;
  ShardOptions options;
  options.n_ctx = kCtx;
  options.n_seq = c.n_seq;
  options.isa = kernels::best_isa(kernels::detect_cpu());

  // The plan: stages of n_ranks nodes whose bandwidths differ, so shares are uneven.
  const PlanModel plan_model = plan_model_from(info, file);
  const double bandwidths[] = {10, 30, 20, 15, 25, 12};
  std::vector<NodeProfile> nodes;
  for (int i = 0; i < c.n_ranks * c.n_stages; ++i) {
    nodes.push_back({"n" + std::to_string(i), i == 0 ? "local" : "n" + std::to_string(i) + ":7000",
                     1, 4 * kGiB, bandwidths[i], 0});
  }
  PlanOptions plan_options;
  plan_options.mode = c.n_stages > 1 ? PlanOptions::Mode::kHybrid : PlanOptions::Mode::kTensor;
  plan_options.pipeline_stages = c.n_stages;
  plan_options.tensor_ranks = c.n_ranks;
  plan_options.moe = c.moe;
  plan_options.n_ctx = kCtx;
  plan_options.n_seq = c.n_seq;
  const Plan plan = herd::plan(plan_model, nodes, plan_options);
  check_plan(plan, plan_model, nodes, plan_options);
  ASSERT_EQ(plan.stages.size(), static_cast<size_t>(c.n_stages));
  std::string layout;
  for (const Stage& stage : plan.stages) {
    ASSERT_EQ(stage.ranks.size(), static_cast<size_t>(c.n_ranks));
    layout += describe(stage);
  }
  SCOPED_TRACE("plan:" + layout);

  // The reference: the whole model in one shard. Each sequence's prompt goes in one
  // chunk, then every sequence decodes greedily, one token per sequence per pass; the
  // ranks then run the same batches.
  const int64_t prompt_lengths[] = {12, 7};
  std::vector<std::vector<int32_t>> prompts;
  for (int seq = 0; seq < c.n_seq; ++seq) {
    const std::vector<int32_t> tokens =
        read_tokens("../shared/models/" + c.model + "." + std::to_string(seq) + ".tokens");
    prompts.emplace_back(tokens.begin(), tokens.begin() + prompt_lengths[seq]);
  }
  constexpr int kDecode = 8;
  Shard whole = Shard::load(file, info, ShardSpec{}, options);
  ThreadPool whole_pool(1);
  std::vector<Batch> batches;
  std::vector<std::vector<float>> expected;  // per batch: [n_logits][n_vocab]
  batches.emplace_back();
  for (int seq = 0; seq < c.n_seq; ++seq) {
    for (size_t i = 0; i < prompts[size_t(seq)].size(); ++i)
      batches[0].add(prompts[size_t(seq)][i], seq, static_cast<int32_t>(i), true);
  }
  for (int step = 0; step <= kDecode; ++step) {
    expected.emplace_back();
    whole.forward(batches.back(), nullptr, expected.back(), whole_pool);
    if (step == kDecode) break;
    // The next token of each sequence follows the logits of its last token in the batch.
    const Batch& last = batches.back();
    Batch next;
    for (int64_t t = 0; t < last.size(); ++t) {
      if (t + 1 < last.size() && last.seq[size_t(t + 1)] == last.seq[size_t(t)]) continue;
      next.add(argmax(expected.back().data() + t * hp.n_vocab, hp.n_vocab), last.seq[size_t(t)],
               last.pos[size_t(t)] + 1, true);
    }
    batches.push_back(std::move(next));
  }
  ASSERT_EQ(batches.back().size(), c.n_seq);

  // The stages in order; each runs every batch (its KV cache holds its own layers only).
  // After a stage every rank holds the same full hidden state: the next stage's input.
  std::vector<std::vector<float>> inputs;  // per batch [n][n_embd]
  std::vector<std::vector<std::vector<float>>> outputs;
  size_t packed_bytes = 0;  // of all ranks
  for (const Stage& stage : plan.stages) {
    outputs = run_stage(file, info, options, stage, batches, inputs, c.ring, packed_bytes);
    ASSERT_FALSE(HasFailure());
    if (stage.output) break;
    for (size_t r = 1; r < outputs.size(); ++r) EXPECT_EQ(outputs[r], outputs[0]) << "rank " << r;
    inputs = outputs[0];
  }
  const Stage& last = plan.stages.back();
  // Every weight is packed by one rank only, but for the KV heads of a cut GQA group, which
  // every rank reading them holds. (f32 / f16 weights are read in place, so there the
  // ranks own only the column slices they copied out.)
  // (MLA ranks each hold the latent's projections whole, and expert-parallel ranks the
  // dense layers and shared experts: only grouped-query models are counted.)
  // (Nor hybrids: a tiled model's ranks each hold every K head's q and k rows.)
  const bool counted = info.arch->attention == AttentionKind::kGqa && !info.arch->delta_net;
  size_t extra_kv_bytes = 0;
  for (const Stage& stage : counted ? plan.stages : std::vector<Stage>{}) {
    for (int64_t kv : stage.shared_kv_heads) {
      size_t copies = 0;
      for (const Rank& r : stage.ranks) copies += r.kv_head_begin <= kv && kv < r.kv_head_end;
      for (int64_t il = stage.layer_begin; il < stage.layer_end; ++il) {
        for (const char* name : {"attn_k", "attn_v"}) {
          const gguf::TensorInfo& t =
              file.tensor("blk." + std::to_string(il) + "." + name + ".weight");
          extra_kv_bytes +=
              (copies - 1) * row_bytes(t.type, t.shape[0]) * static_cast<size_t>(hp.head_dim);
        }
      }
    }
  }
  if (counted && whole.packed_weight_bytes() > 0) {
    const size_t once = whole.packed_weight_bytes() + extra_kv_bytes;
    EXPECT_LE(packed_bytes, once + once / 50);  // + panel padding of uneven row counts
  }
  // Concatenate the vocabulary slices and compare row by row.
  double max_err = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    const int64_t n_rows = batches[b].n_logits();
    ASSERT_EQ(static_cast<int64_t>(expected[b].size()), n_rows * hp.n_vocab);
    for (int64_t row = 0; row < n_rows; ++row) {
      std::vector<float> got;  // [n_vocab]
      for (size_t r = 0; r < last.ranks.size(); ++r) {
        const int64_t width = last.ranks[r].vocab_end - last.ranks[r].vocab_begin;
        ASSERT_EQ(static_cast<int64_t>(outputs[r][b].size()), n_rows * width);
        const float* part = outputs[r][b].data() + row * width;
        got.insert(got.end(), part, part + width);
      }
      ASSERT_EQ(static_cast<int64_t>(got.size()), hp.n_vocab);
      const float* want = expected[b].data() + row * hp.n_vocab;
      const auto [lo, hi] = std::minmax_element(want, want + hp.n_vocab);
      double err = 0;
      for (int64_t j = 0; j < hp.n_vocab; ++j)
        err = std::max(err, double(std::fabs(got[size_t(j)] - want[j])));
      err /= std::max(1e-6, double(*hi - *lo));
      max_err = std::max(max_err, err);
      EXPECT_LE(err, 1e-3) << "batch " << b << " row " << row;
      EXPECT_EQ(argmax(got.data(), hp.n_vocab), argmax(want, hp.n_vocab))
          << "batch " << b << " row " << row;
    }
  }
  RecordProperty("max_err", std::to_string(max_err));
  std::printf("[ tp       ] %s max err %.3g of the logit range;%s\n", case_name(c).c_str(), max_err,
              layout.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    SharedModels, TensorParallel,
    ::testing::Values(
        Case{"llama-f16", 2}, Case{"llama-f16", 3}, Case{"llama3r-f32", 2}, Case{"llama3r-f32", 3},
        Case{"llama-q4_0", 2}, Case{"llama-q4_0", 3}, Case{"llama-q4_k_m", 2},
        Case{"llama-q4_k_m", 3}, Case{"qwen2-f32", 2}, Case{"qwen2-f16", 3}, Case{"qwen3-f16", 2},
        Case{"qwen3-f32", 3}, Case{"qwen3moe-f32", 2, PlanOptions::MoeMode::kExpertParallel},
        Case{"qwen3moe-f32", 3, PlanOptions::MoeMode::kExpertParallel},
        Case{"qwen3moe-f16", 2, PlanOptions::MoeMode::kSplitExperts},
        Case{"qwen3moe-f32", 3, PlanOptions::MoeMode::kSplitExperts},
        Case{"qwen2-f32", 3, PlanOptions::MoeMode::kAuto, true},
        Case{"qwen3moe-f32", 2, PlanOptions::MoeMode::kExpertParallel, true},
        Case{"llama-q4_0", 2, PlanOptions::MoeMode::kAuto, false, 2},
        Case{"qwen3moe-f16", 3, PlanOptions::MoeMode::kSplitExperts, false, 2},
        Case{"qwen2-f16", 3, PlanOptions::MoeMode::kAuto, false, 1, 2},
        Case{"qwen3moe-f32", 3, PlanOptions::MoeMode::kExpertParallel, false, 1, 2},
        Case{"llama-q4_k_m", 3, PlanOptions::MoeMode::kAuto, false, 2, 2},
        // The frontier architectures: MLA with a latent cache per rank, a
        // sigmoid router with shared experts and a dense first layer; sandwich
        // norms and sliding windows; attention sinks and expert biases.
        Case{"frontier/deepseek2-f32", 2, PlanOptions::MoeMode::kExpertParallel},
        Case{"frontier/deepseek2-f32", 3, PlanOptions::MoeMode::kExpertParallel},
        Case{"frontier/deepseek2-f32", 2, PlanOptions::MoeMode::kSplitExperts},
        Case{"frontier/deepseek2-q8_0", 2, PlanOptions::MoeMode::kSplitExperts},
        Case{"frontier/deepseek2-f32", 2, PlanOptions::MoeMode::kExpertParallel, true, 1, 2},
        Case{"frontier/deepseek2-f32", 2, PlanOptions::MoeMode::kSplitExperts, false, 2},
        Case{"frontier/gemma3-f32", 2}, Case{"frontier/gemma3-f32", 3},
        Case{"frontier/gpt-oss-f32", 2, PlanOptions::MoeMode::kExpertParallel},
        Case{"frontier/gpt-oss-f32", 3, PlanOptions::MoeMode::kSplitExperts},
        Case{"frontier/gpt-oss-f32", 2, PlanOptions::MoeMode::kSplitExperts, false, 1, 2},
        // GLM-4.5: partial rope, q/k/v biases, a NextN block that no rank runs; MiniMax-M2:
        // the q/k norm over the whole row, its sums of squares all-reduced (over 3 ranks a
        // GQA group is cut: its KV head is counted once); GLM-5: mainline's MLA layout.
        Case{"frontier2/glm4moe-f32", 2, PlanOptions::MoeMode::kExpertParallel},
        Case{"frontier2/glm4moe-f32", 3, PlanOptions::MoeMode::kSplitExperts},
        Case{"frontier2/glm4moe-q8_0", 2, PlanOptions::MoeMode::kSplitExperts},
        Case{"frontier2/glm4moe-f32", 2, PlanOptions::MoeMode::kExpertParallel, true, 1, 2},
        Case{"frontier2/glm4moe-f32", 2, PlanOptions::MoeMode::kSplitExperts, false, 2},
        Case{"frontier2/minimax-m2-f32", 2, PlanOptions::MoeMode::kSplitExperts},
        Case{"frontier2/minimax-m2-f32", 3, PlanOptions::MoeMode::kExpertParallel, true},
        Case{"frontier2/glm-dsa-f32", 2, PlanOptions::MoeMode::kSplitExperts},

        // Hybrids of Gated DeltaNet and gated attention, two sequences through the
        // recurrent states: the linear layers cut by V head (grouped and tiled).
        Case{"frontier2/qwen35moe-f32", 2, PlanOptions::MoeMode::kExpertParallel, false, 1, 2},
        Case{"frontier2/qwen35moe-f32", 3, PlanOptions::MoeMode::kSplitExperts, true, 1, 2},
        Case{"frontier2/qwen35moe-f32", 2, PlanOptions::MoeMode::kSplitExperts, false, 2, 2},
        Case{"frontier2/qwen35-f32", 2, PlanOptions::MoeMode::kAuto, false, 1, 2},
        Case{"frontier2/qwen3next-f32", 3, PlanOptions::MoeMode::kExpertParallel, false, 1, 2},
        Case{"frontier2/qwen35moe-q8_0", 2, PlanOptions::MoeMode::kSplitExperts}),
    param_name);

// ---- bad slices ----

struct Loaded {
  gguf::File file;
  ModelInfo info;
};

Loaded open_model(const std::string& name) {
  gguf::File file = gguf::File::open("../shared/models/" + name + ".gguf");
  ModelInfo info = read_model_info(file);
  return {std::move(file), std::move(info)};
}

std::string load_error(const Loaded& m, const TensorSlice& slice) {
  ShardSpec spec;
  spec.slice = slice;
  ShardOptions options;
  options.n_ctx = kCtx;
  try {
    Shard::load(m.file, m.info, spec, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TensorSlice, ColumnsThatCutAQuantBlockAreRefusedNamingTheTensor) {
  const Loaded m = open_model("llama-q4_0");  // blocks of 32
  TensorSlice ff;
  ff.ff_begin = 0;
  ff.ff_end = 100;
  EXPECT_NE(load_error(m, ff).find("'blk.0.ffn_down.weight': columns [0, 100) cut its q4_0 "
                                   "blocks of 32"),
            std::string::npos)
      << load_error(m, ff);
  const Loaded k = open_model("llama-q4_k");  // blocks of 256 > one head of 64
  TensorSlice heads;
  heads.head_begin = 1;
  heads.kv_head_begin = 0;
  EXPECT_NE(load_error(k, heads).find("'blk.0.attn_output.weight': columns [64, 256)"),
            std::string::npos)
      << load_error(k, heads);
}

TEST(TensorSlice, RangesOutsideTheModelOrMissingKvHeadsAreRefused) {
  const Loaded m = open_model("qwen3moe-f32");  // 4 heads, 2 KV heads, 4 experts of 96 rows
  TensorSlice kv;
  kv.head_begin = 1;
  kv.head_end = 3;  // reads KV heads 0 and 1
  kv.kv_head_begin = 1;
  EXPECT_NE(load_error(m, kv).find("KV heads [1, 2) miss some of [0, 2)"), std::string::npos)
      << load_error(m, kv);
  TensorSlice vocab;
  vocab.vocab_end = 385;
  EXPECT_NE(load_error(m, vocab).find("vocabulary rows [0, 385) are outside the model's 384"),
            std::string::npos);
  TensorSlice experts;
  experts.experts = std::vector<int64_t>{2, 1};
  EXPECT_NE(load_error(m, experts).find("ascending distinct"), std::string::npos);
}

TEST(TensorSlice, ASliceRunsOnlyWithAnAllReduce) {
  const Loaded m = open_model("qwen3-f16");
  ShardSpec spec;
  spec.slice.ff_end = 128;
  ShardOptions options;
  options.n_ctx = kCtx;
  Shard rank = Shard::load(m.file, m.info, spec, options);
  EXPECT_TRUE(rank.is_sliced());
  EXPECT_EQ(rank.spec().slice.ff_end, 128);
  EXPECT_EQ(rank.spec().slice.head_end, m.info.hp.n_head);  // -1 resolved
  Batch batch;
  batch.add(1, 0, 0, true);
  std::vector<float> out;
  ThreadPool pool(1);
  EXPECT_THROW(rank.forward(batch, nullptr, out, pool), Error);

  // Only the vocabulary sliced: no partial sums, so no all-reduce needed.
  ShardSpec head_only;
  head_only.slice.vocab_begin = 100;
  head_only.slice.vocab_end = 200;
  Shard vocab_rank = Shard::load(m.file, m.info, head_only, options);
  Shard whole = Shard::load(m.file, m.info, ShardSpec{}, options);
  std::vector<float> all;
  vocab_rank.forward(batch, nullptr, out, pool);
  whole.forward(batch, nullptr, all, pool);
  ASSERT_EQ(out.size(), 100u);  // [1][vocab_end - vocab_begin]
  for (size_t j = 0; j < out.size(); ++j) EXPECT_EQ(out[j], all[100 + j]);
}

}  // namespace
}  // namespace herd::engine
