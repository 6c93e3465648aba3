// The decode path allocates nothing once warm: every heap allocation of the process is
// counted (operator new is replaced in this test binary only), and a shard of each
// architecture decodes tokens after a warm-up prefill and decode step without one; so does
// a whole scheduler step (the loop around the model: batch, sampling, text, stream) for two
// requests decoding together, plainly and with prompt-lookup drafts.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "engine/mtp_head.h"
#include "engine/reference_check.h"
#include "engine/runner.h"
#include "engine/scheduler.h"
#include "engine/shard.h"
#include "kernels/matmul.h"
#include "model/model_info.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// The replacements below pair malloc with free themselves; GCC cannot see that they replace
// the global operators and warns that free() receives memory from new.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  return operator new(size);
}
void* operator new(std::size_t size, std::align_val_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t a = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return operator new(size, align);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace herd::engine {
namespace {

// A CPU shard of a few positions, on this machine's best kernels.
ShardOptions small_options() {
  ShardOptions options;
  options.n_ctx = 64;
  options.n_threads = 2;
  options.isa = kernels::best_isa(kernels::detect_cpu());
  return options;
}

class DecodeAllocations : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeAllocations, NoneOnceWarm) {
  const gguf::File file = gguf::File::open("../shared/models/" + GetParam() + ".gguf");
  const ModelInfo info = read_model_info(file);
  const ShardOptions options = small_options();
  Shard shard = Shard::load(file, info, ShardSpec{}, options);
  ThreadPool pool(2);
  std::vector<float> logits;
  Batch prompt;
  for (int32_t i = 0; i < 8; ++i) prompt.add(i + 1, 0, i, i == 7);
  shard.forward(prompt, nullptr, logits, pool);
  Batch step;
  step.add(1, 0, 8, true);
  shard.forward(step, nullptr, logits, pool);  // warm: the one-token sizes are reached

  const long before = g_allocations.load();
  for (int32_t pos = 9; pos < 20; ++pos) {
    step.tokens[0] = (pos * 37) % 300;
    step.pos[0] = pos;
    shard.forward(step, nullptr, logits, pool);
  }
  EXPECT_EQ(g_allocations.load() - before, 0) << "heap allocations in 11 decode steps";
}

INSTANTIATE_TEST_SUITE_P(Architectures, DecodeAllocations,
                         ::testing::Values("llama-q4_0", "qwen3moe-f16", "qwen2-f32",
                                           "frontier/deepseek2-q8_0", "frontier/gemma3-f32",
                                           "frontier/gpt-oss-f32", "frontier2/glm4moe-q8_0",
                                           "frontier2/qwen35moe-q8_0", "frontier2/qwen3next-f32",
                                           "frontier2/minimax-m2-f32", "frontier2/glm-dsa-q8_0",
                                           "frontier2/deepseek4-q8_0", "frontier2/gemma4-q8_0",
                                           "frontier2/gemma4e-q8_0"),
                         model_test_name);

class SchedulerStepAllocations : public ::testing::TestWithParam<int> {};

TEST_P(SchedulerStepAllocations, NoneOnceWarm) {
  const int lookup = GetParam();
  LocalOptions lo;
  lo.threads = 2;
  lo.n_ctx = 256;
  lo.n_seq = 2;
  lo.device = "cpu";
  auto runner = LocalRunner::open("../shared/models/llama-q4_0.gguf", lo);
  const auto tok = tokenizer::Tokenizer::from_gguf(runner->file());
  Scheduler scheduler(*runner, tok, {}, nullptr);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 2; ++i) {
    GenerationParams p;
    p.prompt = tok.encode(i == 0 ? "the herd runs the model and the herd runs" : "a b c a b c a b",
                          true, false);
    p.max_tokens = 200;
    p.sampler.temperature = 0;
    p.stop_at_eog = false;
    if (lookup > 0) p.speculative = SpeculativeParams{lookup, 1, 3};
    streams.push_back(scheduler.submit(std::move(p)));
  }
  StreamUpdate update;  // the reader's one buffer, as a server's stream would keep
  auto step_and_read = [&] {
    ASSERT_TRUE(scheduler.step());
    for (auto& s : streams) {
      s->wait(std::chrono::milliseconds(0), update);
      ASSERT_FALSE(update.finish.has_value()) << update.finish->error;
    }
  };
  for (int i = 0; i < 8; ++i) step_and_read();  // prefill, then warm decode steps

  const long before = g_allocations.load();
  for (int i = 0; i < 16; ++i) step_and_read();
  EXPECT_EQ(g_allocations.load() - before, 0) << "heap allocations in 16 scheduler steps";
}

INSTANTIATE_TEST_SUITE_P(Drafts, SchedulerStepAllocations, ::testing::Values(0, 4),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param == 0 ? std::string("Plain") : std::string("PromptLookup");
                         });

// The same with the model's MTP head drafting (scheduler_mtp.cpp): after each forward the
// kept rows go through the head, whose chained guesses are the next step's drafts.
TEST(SchedulerMtpStepAllocations, NoneOnceWarm) {
  LocalOptions lo;
  lo.threads = 2;
  lo.n_ctx = 256;
  lo.n_seq = 2;
  lo.device = "cpu";
  lo.mtp = true;
  auto runner = LocalRunner::open("../shared/models/frontier2/glm4moe-q8_0.gguf", lo);
  ASSERT_GT(runner->mtp_layers(), 0);
  const auto tok = tokenizer::Tokenizer::from_gguf(runner->file());
  Scheduler scheduler(*runner, tok, {}, nullptr);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 2; ++i) {
    GenerationParams p;
    for (int32_t t = 0; t < 9 + i; ++t) p.prompt.push_back(1 + (t * 13 + i) % 200);
    p.max_tokens = 200;
    p.sampler.temperature = 0;
    p.stop_at_eog = false;
    p.speculative = SpeculativeParams{0, 1, 3, 0, 3};
    streams.push_back(scheduler.submit(std::move(p)));
  }
  StreamUpdate update;
  int64_t drafted = 0;
  auto step_and_read = [&] {
    ASSERT_TRUE(scheduler.step());
    drafted += scheduler.last_batch().size() - 2;  // the rows past the two pending tokens
    for (auto& s : streams) {
      s->wait(std::chrono::milliseconds(0), update);
      ASSERT_FALSE(update.finish.has_value()) << update.finish->error;
    }
  };
  for (int i = 0; i < 8; ++i) step_and_read();

  const long before = g_allocations.load();
  drafted = 0;
  for (int i = 0; i < 16; ++i) step_and_read();
  EXPECT_EQ(g_allocations.load() - before, 0) << "heap allocations in 16 scheduler steps";
  EXPECT_GT(drafted, 0) << "no MTP drafts were checked";
}

// The MTP head's drafting (mtp_head.h) as decoding uses it: after a prompt's rows, one kept
// row per step, its drafts in the caller's reused vector.
class MtpDraftAllocations : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpDraftAllocations, NoneOnceWarm) {
  const gguf::File file = gguf::File::open("../shared/models/" + GetParam() + ".gguf");
  const ModelInfo info = read_model_info(file);
  const ShardOptions options = small_options();
  MtpHead head = MtpHead::load(file, info, options);
  ThreadPool pool(2);
  const std::vector<float> hidden(static_cast<size_t>(info.hp.n_embd), 0.5f);
  std::vector<MtpInput> rows;
  for (int32_t i = -1; i < 8; ++i) rows.push_back({0, i, i < 0 ? nullptr : hidden.data(), i + 2});
  std::vector<MtpDraft> drafts;
  head.draft(rows, 3, drafts, pool);
  rows = {{0, 8, hidden.data(), 1}};
  head.draft(rows, 3, drafts, pool);  // warm: the one-row sizes are reached

  const long before = g_allocations.load();
  for (int32_t pos = 9; pos < 20; ++pos) {
    rows[0] = {0, pos, hidden.data(), (pos * 37) % 300};
    head.draft(rows, 3, drafts, pool);
  }
  EXPECT_EQ(g_allocations.load() - before, 0) << "heap allocations in 11 drafts of 3 tokens";
  ASSERT_EQ(drafts.size(), 1u);
  EXPECT_EQ(drafts[0].tokens.size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(Architectures, MtpDraftAllocations,
                         ::testing::Values("frontier2/glm4moe-q8_0", "frontier2/glm-dsa-q8_0",
                                           "frontier2/qwen35moe-q8_0"),
                         model_test_name);

}  // namespace
}  // namespace herd::engine
