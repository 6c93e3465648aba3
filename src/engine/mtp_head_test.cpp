// The MTP head (mtp_head.h) on synthesized models with a NextN block (deepseek2, glm4moe,
// glm-dsa, qwen35): its logits against a scalar re-implementation of everything around the block
// (embedding, enorm / hnorm, the concatenation, eh_proj, shared_head_norm, the head), its
// chained drafts, and drafting in a greedy speculative loop whose output must be the
// target's own greedy output (a recurrent target restoring its snapshots).
//
// And the head alone against ik_llama.cpp's MTP graph, on those models and on
// ../shared/models/frontier2's (MtpHeadReference).
#include "engine/mtp_head.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "engine/reference_check.h"
#include "engine/runner.h"
#include "model/synth.h"
#include "quant/types.h"
#include "util/error.h"

namespace herd::engine {
namespace {

std::string synth_model(const std::string& arch) {
  SynthOptions o;
  o.arch = arch;
  o.type = "f32";
  // A file per test: ctest runs the tests of this binary in parallel processes.
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(test->test_suite_name()) + "_" + test->name();
  std::replace(name.begin(), name.end(), '/', '_');
  o.out_path = ::testing::TempDir() + "/mtp_" + name + ".gguf";
  o.n_embd = 128;
  o.n_layer = 3;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.head_dim = 32;
  o.n_ff = 256;
  o.n_expert = 8;
  o.n_ff_expert = 64;
  o.n_ctx = 256;
  o.n_nextn = 1;
  o.threads = 2;
  if (arch == "deepseek2") {
    o.n_head_kv = 0;
    o.head_dim = 96;  // 64 nope + 32 rope
    o.rope_dim = 32;
  }
  if (arch == "glm-dsa") {
    // GLM-5's own head shapes (192 nope + 64 rope, 256-wide values, a 512 latent): the
    // reference reads mainline's MLA layout only with those.
    o.n_head_kv = 0;
    o.head_dim = 0;
  }
  if (arch == "qwen35") {
    o.delta_n_k_heads = 2;
    o.delta_n_v_heads = 4;
    o.delta_head_dim = 32;
    o.full_attention_interval = 3;
  }
  synthesize(o);
  return o.out_path;
}

std::unique_ptr<LocalRunner> open_runner(const std::string& path, bool mtp) {
  LocalOptions o;
  o.threads = 2;
  o.n_ctx = 64;
  o.n_seq = 2;
  o.mtp = mtp;
  return LocalRunner::open(path, o);
}

// A tensor as floats.
std::vector<float> floats_of(const gguf::File& file, const std::string& name) {
  const gguf::TensorInfo& t = file.tensor(name);
  std::vector<float> out(static_cast<size_t>(t.n_elements));
  type_traits(t.type).dequantize(t.data, out.data(), t.n_elements);
  return out;
}

std::vector<double> rms_norm_ref(const float* x, const std::vector<float>& w, float eps) {
  const size_t n = w.size();
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const double scale = 1.0 / std::sqrt(sum / static_cast<double>(n) + eps);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
  return out;
}

// y = W x for W stored [cols, rows] (GGUF's order: a row is cols values).
std::vector<float> matvec_ref(const std::vector<float>& w, const std::vector<double>& x) {
  const size_t cols = x.size(), rows = w.size() / cols;
  std::vector<float> y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += static_cast<double>(w[r * cols + c]) * x[c];
    y[r] = static_cast<float>(sum);
  }
  return y;
}

double max_error(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

std::vector<float> read_logits_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("test", "cannot read " + path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

const std::vector<int32_t> kPrompt = {5, 17, 42, 99, 3, 250, 7, 64};
constexpr int32_t kFirst = 1;  // the reference test's token before kPrompt

class MtpHeadTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpHeadTest, LogitsMatchAScalarHeadAroundTheBlock) {
  const std::string path = synth_model(GetParam());
  auto runner = open_runner(path, true);
  ASSERT_EQ(runner->mtp_layers(), 1);
  const HParams& hp = runner->hparams();
  const gguf::File& file = runner->file();
  const int64_t n = static_cast<int64_t>(kPrompt.size()), e = hp.n_embd, v = hp.n_vocab;
  Batch b;
  for (int64_t i = 0; i < n; ++i) b.add(kPrompt[static_cast<size_t>(i)], 0, i, true);
  std::vector<float> logits;
  runner->forward(b, logits);
  // Every row's hidden state is kept: the output head over its norm gives the row's logits.
  const std::span<const float> hidden = runner->shard().last_hidden();
  ASSERT_EQ(static_cast<int64_t>(hidden.size()), n * e);
  const std::vector<float> output_norm = floats_of(file, "output_norm.weight");
  const std::vector<float> output = floats_of(file, "output.weight");
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<float> want =
        matvec_ref(output, rms_norm_ref(hidden.data() + t * e, output_norm, hp.rms_eps));
    EXPECT_LT(max_error(logits.data() + t * v, want.data(), v), 1e-4) << "row " << t;
  }

  // The head over every prompt row (the token after each), against the scalar glue around
  // a separately loaded shard of the same block.
  ShardOptions options;
  options.n_ctx = 64;
  options.n_seq = 2;
  options.isa = kernels::best_isa(kernels::detect_cpu());
  options.n_threads = 2;
  MtpHead head = MtpHead::load(file, runner->info(), options);
  ShardSpec spec{hp.n_layer, hp.n_layer + 1, false, false, {}};
  Shard block = Shard::load(file, mtp_model_info(runner->info()), spec, options);
  const std::string blk = "blk." + std::to_string(hp.n_layer) + ".nextn.";
  const std::vector<float> embd = floats_of(file, "token_embd.weight");
  const std::vector<float> enorm = floats_of(file, blk + "enorm.weight");
  const std::vector<float> hnorm = floats_of(file, blk + "hnorm.weight");
  const std::vector<float> eh_proj = floats_of(file, blk + "eh_proj.weight");
  const std::vector<float> shared_norm = floats_of(file, blk + "shared_head_norm.weight");
  // Rows from position -1 (the first token, no hidden state) to n - 1 (the token after the
  // prompt).
  std::vector<MtpInput> rows;
  std::vector<float> x;  // [n + 1][n_embd]
  Batch block_batch;
  for (int64_t t = -1; t < n; ++t) {
    const int32_t next = t + 1 < n ? kPrompt[static_cast<size_t>(t + 1)] : 11;
    const float* h_t = t >= 0 ? hidden.data() + t * e : nullptr;
    rows.push_back({0, static_cast<int32_t>(t), h_t, next});
    // x = eh_proj [enorm(embed(next)) | hnorm(h)]
    std::vector<double> joined = rms_norm_ref(embd.data() + next * e, enorm, hp.rms_eps);
    const std::vector<double> h =
        h_t != nullptr ? rms_norm_ref(h_t, hnorm, hp.rms_eps) : std::vector<double>(e, 0.0);
    joined.insert(joined.end(), h.begin(), h.end());
    const std::vector<float> xt = matvec_ref(eh_proj, joined);
    x.insert(x.end(), xt.begin(), xt.end());
    block_batch.add(next, 0, static_cast<int32_t>(t + 1), true);
  }
  ThreadPool pool(2);
  std::vector<float> head_logits, head_hidden, block_out;
  head.forward(rows, head_logits, head_hidden, pool);
  block.forward(block_batch, x.data(), block_out, pool);
  ASSERT_EQ(static_cast<int64_t>(head_logits.size()), (n + 1) * v);
  ASSERT_EQ(static_cast<int64_t>(head_hidden.size()), (n + 1) * e);
  for (int64_t t = 0; t <= n; ++t) {
    EXPECT_LT(max_error(head_hidden.data() + t * e, block_out.data() + t * e, e), 1e-4);
    const std::vector<float> want =
        matvec_ref(output, rms_norm_ref(block_out.data() + t * e, shared_norm, hp.rms_eps));
    EXPECT_LT(max_error(head_logits.data() + t * v, want.data(), v), 1e-4) << "row " << t;
  }

  // The runner's drafts chain the head: the first token is the argmax of the last row, the
  // second the argmax of a step on the head's own hidden state and that token.
  std::vector<MtpStart> starts;
  for (const MtpInput& r : rows) starts.push_back({r.seq, r.pos, r.pos, r.token});
  std::vector<MtpDraft> drafts;
  runner->mtp_draft(starts, 3, drafts);
  ASSERT_EQ(drafts.size(), 1u);
  ASSERT_EQ(drafts[0].tokens.size(), 3u);
  const int32_t first = argmax(head_logits.data() + n * v, v);
  EXPECT_EQ(drafts[0].tokens[0], first);
  const std::vector<float> last_hidden(head_hidden.begin() + n * e, head_hidden.end());
  const MtpInput step{0, static_cast<int32_t>(n), last_hidden.data(), first};
  head.forward({&step, 1}, head_logits, head_hidden, pool);
  EXPECT_EQ(drafts[0].tokens[1], argmax(head_logits.data(), v));
  // Drafting again from the same rows overwrites the chain's rows: the same drafts.
  std::vector<MtpDraft> again;
  runner->mtp_draft(starts, 3, again);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].tokens, drafts[0].tokens);
  // A start that is not a row of the last forward is refused.
  const MtpStart wrong{0, 3, 4, 1};
  EXPECT_THROW(runner->mtp_draft({&wrong, 1}, 2, again), Error);
}

// Greedy speculative decoding with the head's drafts: the output is token for token the
// target's greedy output; the acceptance on random weights is printed, not asserted.
TEST_P(MtpHeadTest, DraftsVerifiedByTheTargetKeepItsGreedyOutput) {
  const std::string path = synth_model(GetParam());
  constexpr size_t kTokens = 16;
  constexpr int kDraft = 3;
  const int64_t n = static_cast<int64_t>(kPrompt.size());
  std::vector<int32_t> plain;
  {
    auto target = open_runner(path, false);
    EXPECT_EQ(target->mtp_layers(), 0);
    std::vector<float> logits;
    Batch b;
    for (int64_t i = 0; i < n; ++i) b.add(kPrompt[static_cast<size_t>(i)], 0, i, i + 1 == n);
    target->forward(b, logits);
    const int64_t v = target->hparams().n_vocab;
    while (plain.size() < kTokens) {
      plain.push_back(argmax(logits.data(), v));
      b.clear();
      b.add(plain.back(), 0, static_cast<int32_t>(n + plain.size() - 1), true);
      target->forward(b, logits);
    }
  }
  // oracle: the first r % (k + 1) tokens of round r's draft are the target's own (plain's),
  // so that rounds keep several rows and the head starts again from several (random weights
  // make its own guesses all miss).
  for (const bool oracle : {false, true}) {
    SCOPED_TRACE(oracle ? "with the target's tokens mixed in" : "the head's drafts");
    auto runner = open_runner(path, true);
    const int64_t v = runner->hparams().n_vocab;
    Batch b;
    for (int64_t i = 0; i < n; ++i) b.add(kPrompt[static_cast<size_t>(i)], 1, i, i + 1 == n);
    std::vector<float> logits;
    runner->forward(b, logits);
    std::vector<int32_t> out = {argmax(logits.data(), v)};
    std::vector<MtpStart> starts = {{1, -1, -1, kPrompt[0]}};
    for (int64_t i = 0; i < n; ++i) {
      const int32_t next = i + 1 < n ? kPrompt[static_cast<size_t>(i + 1)] : out[0];
      starts.push_back({1, static_cast<int32_t>(i), i, next});
    }
    int drafted = 0, accepted = 0, forwards = 0, kept_rows = 0;
    std::vector<MtpDraft> drafts;
    while (out.size() < kTokens) {
      runner->mtp_draft(starts, kDraft, drafts);
      ASSERT_EQ(drafts.size(), 1u);
      std::vector<int32_t> d = drafts[0].tokens;
      ASSERT_EQ(d.size(), static_cast<size_t>(kDraft));
      for (int i = 0; oracle && i < forwards % (kDraft + 1); ++i) {
        if (out.size() + i < plain.size()) d[static_cast<size_t>(i)] = plain[out.size() + i];
      }
      // The target checks [last, d...] at the positions after the kept tokens.
      const auto p = static_cast<int32_t>(n + out.size() - 1);
      b.clear();
      b.add(out.back(), 1, p, true);
      for (int i = 0; i < kDraft; ++i) b.add(d[static_cast<size_t>(i)], 1, p + 1 + i, true);
      // A recurrent target (qwen35) cannot cut its state back: a snapshot before the check,
      // restored when a draft token is refused.
      if (runner->recurrent()) runner->save_state(1, p);
      runner->forward(b, logits);
      ++forwards;
      int a = 0;
      while (a < kDraft && argmax(logits.data() + a * v, v) == d[static_cast<size_t>(a)]) ++a;
      drafted += kDraft;
      accepted += a;
      kept_rows = std::max(kept_rows, a + 1);
      const int32_t next = argmax(logits.data() + a * v, v);
      out.insert(out.end(), d.begin(), d.begin() + a);
      out.push_back(next);
      if (runner->recurrent() && a < kDraft) {
        // The kept tokens again from the snapshot: their rows are the head's starts below.
        ASSERT_EQ(runner->restore_state(1, p), p);
        b.clear();
        b.add(out[out.size() - static_cast<size_t>(a) - 2], 1, p, false);
        for (int i = 0; i < a; ++i) b.add(d[static_cast<size_t>(i)], 1, p + 1 + i, i + 1 == a);
        runner->forward(b, logits);
      }
      // The head starts again from the verified rows that were kept.
      starts.clear();
      for (int i = 0; i <= a; ++i) {
        starts.push_back({1, p + i, i, i < a ? d[static_cast<size_t>(i)] : next});
      }
    }
    if (oracle) {
      EXPECT_GT(kept_rows, 2);
    }
    // The head's cache, after chains past the kept positions and starts spread over the
    // rounds, drafts as a fresh one that sees the whole sequence at once.
    std::vector<MtpDraft> fresh;
    runner->mtp_draft(starts, kDraft, drafts);
    {
      std::vector<int32_t> all = kPrompt;
      all.insert(all.end(), out.begin(), out.end());
      auto replay = open_runner(path, true);
      b.clear();
      starts = {{0, -1, -1, all[0]}};
      for (size_t i = 0; i + 1 < all.size(); ++i) {
        b.add(all[i], 0, static_cast<int32_t>(i), false);
        starts.push_back({0, static_cast<int32_t>(i), static_cast<int64_t>(i), all[i + 1]});
      }
      replay->forward(b, logits);
      replay->mtp_draft(starts, kDraft, fresh);
    }
    ASSERT_EQ(fresh.size(), 1u);
    EXPECT_EQ(fresh[0].tokens, drafts[0].tokens);
    out.resize(kTokens);
    EXPECT_EQ(out, plain);
    if (!oracle) {
      std::printf("[ mtp %s ] acceptance %d/%d, %.2f tokens per target forward\n",
                  GetParam().c_str(), accepted, drafted,
                  static_cast<double>(kTokens) / std::max(1, forwards));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, MtpHeadTest,
                         ::testing::Values("deepseek2", "glm4moe", "glm-dsa", "qwen35"));

// The head alone against ik_llama.cpp's MTP graph: scripts/ik_mtp_logits.cpp wrote
// testdata/mtp_<model>.ik.logits from the synthesized models of synth_model and from the
// files of ../shared/models/frontier2 (which carry a NextN block as the reference's converter
// writes it), with tokens kFirst, kPrompt...: the same hidden rows, a zero one before the first
// token, positions 0..n. The reference's K and V cache is f16: the tolerance of
// reference_logits_test for the weights' type, and the same top token. (Its deepseek2 loader
// refuses a file with NextN blocks, which its converter leaves out; glm-dsa runs the same MLA
// head.)
class MtpHeadReference : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpHeadReference, LogitsMatchIkLlamaCpp) {
  const std::string& model = GetParam();
  const bool shared = model.starts_with("frontier2/");
  const std::string path = shared ? "../shared/models/" + model + ".gguf" : synth_model(model);
  std::string name = model;
  std::replace(name.begin(), name.end(), '/', '_');
  gguf::File file = gguf::File::open(path);
  const ModelInfo info = read_model_info(file);
  const int64_t n = static_cast<int64_t>(kPrompt.size()), e = info.hp.n_embd;
  const int64_t v = info.hp.n_vocab;
  // reference_logits_test's pairs (reference_check.h); q8_0 the wider one, as a one-layer
  // head's rounding of the activations sits closer to its logits.
  const bool quantized = model.ends_with("q8_0");
  const Tolerance tolerance = quantized ? Tolerance{0.2, 0.05} : Tolerance{1e-2, 3e-3};
  const std::vector<float> want =
      read_logits_file("src/engine/testdata/mtp_" + name + ".ik.logits");
  ASSERT_EQ(static_cast<int64_t>(want.size()), (n + 1) * v);
  ShardOptions options;
  options.n_ctx = 64;
  options.isa = kernels::best_isa(kernels::detect_cpu());
  options.n_threads = 2;
  MtpHead head = MtpHead::load(file, info, options);
  std::vector<float> hidden(static_cast<size_t>(n * e));  // as the reference program's
  std::vector<MtpInput> rows = {{0, -1, nullptr, kFirst}};
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < e; ++j) {
      hidden[static_cast<size_t>(i * e + j)] =
          2.0f * std::sin(0.37f * static_cast<float>(i + 1) + 0.11f * static_cast<float>(j));
    }
    rows.push_back(
        {0, static_cast<int32_t>(i), hidden.data() + i * e, kPrompt[static_cast<size_t>(i)]});
  }
  ThreadPool pool(2);
  std::vector<float> logits, head_hidden;
  head.forward(rows, logits, head_hidden, pool);
  double worst = 0, sum = 0;
  for (int64_t i = 0; i <= n; ++i) {
    const float* got = logits.data() + i * v;
    const float* ref = want.data() + i * v;
    double max_abs = 0;
    for (int64_t t = 0; t < v; ++t) {
      const double d = std::fabs(static_cast<double>(got[t]) - ref[t]);
      max_abs = std::max(max_abs, d);
      sum += d;
    }
    EXPECT_LT(max_abs, tolerance.max_err) << "row " << i;
    // q8_0's activations round as the reference's do not quite: a near tie may flip.
    if (!quantized) {
      EXPECT_EQ(argmax(got, v), argmax(ref, v)) << "row " << i;
    }
    worst = std::max(worst, max_abs);
  }
  const double mean = sum / static_cast<double>((n + 1) * v);
  EXPECT_LT(mean, tolerance.mean_err);
  std::printf("[ mtp %s ] difference from the reference: largest %.2g, mean %.2g\n", model.c_str(),
              worst, mean);
}

INSTANTIATE_TEST_SUITE_P(Families, MtpHeadReference,
                         ::testing::Values("glm4moe", "glm-dsa", "qwen35", "frontier2/glm4moe-f32",
                                           "frontier2/glm4moe-q8_0", "frontier2/glm-dsa-f32",
                                           "frontier2/qwen35-f32", "frontier2/qwen35moe-f32",
                                           "frontier2/qwen35moe-q8_0"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           for (char& c : name)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace herd::engine
