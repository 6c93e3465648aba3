// The forward pass on a Vulkan device (lavapipe here) against the reference logits: every
// shared reference model the Vulkan backend can run, whole sequences, chunks of 8 and token by
// token (the decode path); several sequences in one batch; a recurrent model's states per
// slot and their snapshots; the models it cannot run yet refused with the capability named,
// and `--device auto`'s choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "engine/backend.h"
#include "engine/rank.h"
#include "engine/reference_check.h"
#include "engine/shared_memory_sum.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "util/error.h"
#include "vulkan/test_device.h"

namespace herd::engine {
namespace {

std::string test_device_name() {
  const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE");
  return std::string("vulkan:") + (index != nullptr ? index : "0");
}

ModelInfo info_of(const std::string& model) {
  const gguf::File file = gguf::File::open("../shared/" + model + ".gguf");
  return read_model_info(file);
}

// The reference models whose capabilities the Vulkan backend has, and the others.
std::vector<std::string> models_where(bool supported) {
  std::vector<std::string> names;
  for (const std::string& model : model_names()) {
    const ModelInfo info = info_of(model);
    if (vulkan_unsupported(*info.arch, info.hp, false).empty() == supported) {
      names.push_back(model);
    }
  }
  return names;
}

class VulkanReferenceLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(VulkanReferenceLogits, WholeChunkedAndTokenByToken) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  const std::string device = test_device_name();
  check_model(GetParam(), {1, 256, kernels::Isa::kScalar, -1, device});
  // Token by token (the decode path) and chunks after the first, which start past position
  // 0 with several tokens (the causal mask from pos0, windows across a chunk): one model of
  // each architecture (the weight types differ only in the products, which whole sequences
  // check).
  const std::string& m = GetParam();
  if (m.ends_with("-f32") || m.ends_with("llama-q4_0")) {
    check_model(GetParam(), {1, 1, kernels::Isa::kScalar, -1, device});
    check_model(GetParam(), {1, 8, kernels::Isa::kScalar, -1, device});
  }
  // Gated DeltaNet's states carried across chunks through quantized products too.
  if (m.ends_with("qwen35-q8_0")) {
    check_model(GetParam(), {1, 8, kernels::Isa::kScalar, -1, device});
  }
  // DeepSeek V4's quantized file in chunks too: its compressors' blocks and the indexer's
  // choice cross the chunks (the f32 file's runs above cover the same with other weights).
  if (m.ends_with("/deepseek4-q8_0"))
    check_model(GetParam(), {1, 8, kernels::Isa::kScalar, -1, device});
}

// Two sequences in one batch, their tokens interleaved, give the logits each gives alone:
// attention reads each token's own slot, in runs of the batch.
TEST(VulkanBackend, SequencesSharingABatchKeepTheirOwnCache) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  LocalOptions options;
  options.n_ctx = 64;
  options.n_seq = 2;
  options.device = test_device_name();
  auto runner = LocalRunner::open("../shared/models/qwen3-f32.gguf", options);
  const std::vector<int32_t> a = read_tokens("../shared/models/qwen3-f32.1.tokens");
  const std::vector<int32_t> b = read_tokens("../shared/models/qwen3-f32.2.tokens");
  // Alone: a in slot 0, then b in slot 1, one token per forward.
  const std::vector<float> want_a = token_by_token(*runner, a, 0),
                           want_b = token_by_token(*runner, b, 1);
  // Together: prefixes of 3 and 5 tokens in one batch, then a step of each per batch.
  const int64_t n_vocab = runner->hparams().n_vocab;
  std::vector<float> got_a, got_b, logits;
  Batch first;
  for (int32_t i = 0; i < 5; ++i) {
    if (i < 3) first.add(a[size_t(i)], 0, i, true);
    first.add(b[size_t(i)], 1, i, true);
  }
  runner->forward(first, logits);
  // Rows in batch order: a0 b0 a1 b1 a2 b2 b3 b4.
  for (int64_t row = 0; row < first.size(); ++row) {
    auto& got = first.seq[size_t(row)] == 0 ? got_a : got_b;
    got.insert(got.end(), logits.begin() + row * n_vocab, logits.begin() + (row + 1) * n_vocab);
  }
  // Then a step of each per batch, b first (b runs two positions ahead of a).
  for (int32_t i = 3; i < int32_t(a.size()) && i + 2 < int32_t(b.size()); ++i) {
    Batch step;
    step.add(b[size_t(i + 2)], 1, i + 2, true);
    step.add(a[size_t(i)], 0, i, true);
    runner->forward(step, logits);
    got_b.insert(got_b.end(), logits.begin(), logits.begin() + n_vocab);
    got_a.insert(got_a.end(), logits.begin() + n_vocab, logits.end());
  }
  ASSERT_GE(got_a.size(), size_t(5 * n_vocab));
  ASSERT_GE(got_b.size(), size_t(7 * n_vocab));
  for (size_t i = 0; i < got_a.size(); ++i) {
    ASSERT_NEAR(got_a[i], want_a[i], 1e-3 * (1 + std::fabs(want_a[i]))) << i;
  }
  for (size_t i = 0; i < got_b.size(); ++i) {
    ASSERT_NEAR(got_b[i], want_b[i], 1e-3 * (1 + std::fabs(want_b[i]))) << i;
  }
}

// A slot's recurrent states (Gated DeltaNet) on the device: a snapshot after a prefix holds
// what the CPU's states hold there; after more tokens, restoring it and running them again
// gives the same logits; and the host still refuses a batch that does not continue the slot.
TEST(VulkanBackend, RecurrentStatesSnapshotAndRestore) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  const std::string model = "../shared/models/frontier2/qwen35-f32";
  const std::vector<int32_t> tokens = read_tokens(model + ".1.tokens");
  ASSERT_GE(tokens.size(), size_t(8));
  const int32_t prefix = 5;
  LocalOptions options;
  options.n_ctx = 64;
  options.n_seq = 2;
  std::vector<float> logits;
  auto run = [&](LocalRunner& runner, int32_t seq, int32_t from, int32_t to) {
    std::vector<float> all;
    for (int32_t i = from; i < to; ++i) {
      Batch batch;
      batch.add(tokens[size_t(i)], seq, i, true);
      runner.forward(batch, logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  auto cpu = LocalRunner::open(model + ".gguf", options);
  options.device = test_device_name();
  auto device = LocalRunner::open(model + ".gguf", options);
  ASSERT_NE(device->shard().device(), "cpu");
  for (LocalRunner* runner : {cpu.get(), device.get()}) {
    Batch batch;
    for (int32_t i = 0; i < prefix; ++i) batch.add(tokens[size_t(i)], 1, i, i + 1 == prefix);
    runner->forward(batch, logits);
  }
  const RecurrentSnapshot want = cpu->shard().snapshot_state(1);
  const RecurrentSnapshot got = device->shard().snapshot_state(1);
  EXPECT_EQ(got.pos, prefix);
  ASSERT_EQ(got.rows.size(), want.rows.size());
  ASSERT_FALSE(got.rows.empty());
  for (size_t i = 0; i < got.rows.size(); ++i) {
    ASSERT_NEAR(got.rows[i], want.rows[i], 1e-4 * (1 + std::fabs(want.rows[i]))) << i;
  }
  device->save_state(1, prefix);
  const int32_t end = int32_t(tokens.size());
  const std::vector<float> first = run(*device, 1, prefix, end);
  // The slot stands at the end now: a token at the prefix's position is refused.
  EXPECT_THROW(run(*device, 1, prefix, prefix + 1), Error);
  EXPECT_EQ(device->restore_state(1, prefix), prefix);
  const std::vector<float> again = run(*device, 1, prefix, end);
  ASSERT_EQ(again.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) ASSERT_NEAR(again[i], first[i], 1e-6) << i;
}

// Two sequences' tokens alternating in one batch (runs of one token, each slot in several)
// give the logits each gives alone: each run reads and leaves its own slot's states.
TEST(VulkanBackend, AlternatingSequencesKeepTheirOwnRecurrentStates) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  const std::string model = "../shared/models/frontier2/qwen35moe-f32";
  LocalOptions options;
  options.n_ctx = 64;
  options.n_seq = 2;
  options.device = test_device_name();
  auto runner = LocalRunner::open(model + ".gguf", options);
  const std::vector<int32_t> a = read_tokens(model + ".1.tokens");
  const std::vector<int32_t> b = read_tokens(model + ".2.tokens");
  const size_t n = std::min(a.size(), b.size());
  std::vector<float> alone[2], together;
  for (int32_t seq : {0, 1}) {
    Batch batch;
    for (size_t i = 0; i < n; ++i) batch.add((seq == 0 ? a : b)[i], seq, int32_t(i), true);
    runner->forward(batch, alone[seq]);
  }
  Batch batch;
  for (size_t i = 0; i < n; ++i) {
    batch.add(a[i], 0, int32_t(i), true);
    batch.add(b[i], 1, int32_t(i), true);
  }
  runner->forward(batch, together);
  const size_t n_vocab = size_t(runner->hparams().n_vocab);
  ASSERT_EQ(together.size(), 2 * n * n_vocab);
  for (size_t row = 0; row < 2 * n; ++row) {
    const float* want = alone[row % 2].data() + (row / 2) * n_vocab;
    for (size_t v = 0; v < n_vocab; ++v) {
      ASSERT_NEAR(together[row * n_vocab + v], want[v], 1e-4 * (1 + std::fabs(want[v])))
          << "row " << row << " logit " << v;
    }
  }
}

// A model the Vulkan backend cannot run yet is refused with the capability named; auto
// leaves it on the CPU (lavapipe is a CPU driver: auto never picks it).
TEST(VulkanBackend, WhatItCannotRunIsRefusedByName) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  // Every reference model runs whole on the device; a model it cannot run is refused by name
  // (none is left among them: the loop checks that the list stays honest).
  for (const std::string& model : models_where(false)) {
    SCOPED_TRACE(model);
    const ModelInfo info = info_of(model);
    LocalOptions options;
    options.n_ctx = 64;
    options.device = test_device_name();
    try {
      LocalRunner::open("../shared/" + model + ".gguf", options);
      ADD_FAILURE() << "loaded on the Vulkan backend";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(vulkan_unsupported(*info.arch, info.hp, false)),
                std::string::npos)
          << e.what();
    }
    options.device = "auto";
    EXPECT_EQ(LocalRunner::open("../shared/" + model + ".gguf", options)->shard().device(), "cpu");
  }
  // What it still refuses: a tensor-parallel slice of a Gated DeltaNet model.
  const std::string model = "models/frontier2/qwen35-f32";
  const gguf::File file = gguf::File::open("../shared/" + model + ".gguf");
  const ModelInfo info = read_model_info(file);
  const std::string missing = vulkan_unsupported(*info.arch, info.hp, true);
  ASSERT_NE(missing.find("tensor-parallel"), std::string::npos) << missing;
  ShardSpec half;
  half.slice.head_end = info.hp.n_head / 2;
  half.slice.kv_head_end = info.hp.n_head_kv / 2;
  half.slice.ff_end = info.hp.n_ff / 2;
  ShardOptions options;
  options.n_ctx = 64;
  options.device = {Device::kVulkan, 0};
  if (const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE")) {
    options.device.index = std::atoi(index);
  }
  try {
    Shard::load(file, info, half, options);
    ADD_FAILURE() << "a Gated DeltaNet slice loaded on the Vulkan backend";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // Under --device auto the refused slice runs on the CPU, saying why.
  std::string note;
  EXPECT_EQ(open_rank(file, info, half, options, DevicePlacement{}, true, &note)->shard().device(),
            "cpu");
  EXPECT_NE(note.find(missing), std::string::npos) << note;
}

TEST(VulkanBackend, ABadDeviceIsAClearError) {
  LocalOptions options;
  options.device = "cuda";
  try {
    LocalRunner::open("../shared/models/llama-q4_0.gguf", options);
    ADD_FAILURE() << "opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("auto, cpu, vulkan or vulkan:N"), std::string::npos);
  }
  options.device = "vulkan:99";
  EXPECT_THROW(LocalRunner::open("../shared/models/llama-q4_0.gguf", options), Error);
}

// Runs one sequence through a stage of two ranks, rank 0 on the Vulkan device and rank 1 on
// the CPU, each in its own thread, their partial sums meeting in shared memory; whole, then
// token by token. Returns rank 0's logits (it holds the whole vocabulary in these tests).
std::vector<float> run_device_and_cpu(const std::string& model, const TensorSlice& on_device,
                                      const TensorSlice& on_cpu, int64_t chunk) {
  const gguf::File file = gguf::File::open("../shared/" + model + ".gguf");
  const ModelInfo info = read_model_info(file);
  ShardOptions device_options, cpu_options;
  device_options.n_ctx = cpu_options.n_ctx = 64;
  device_options.device = {Device::kVulkan, 0};
  if (const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE")) {
    device_options.device.index = std::atoi(index);
  }
  cpu_options.isa = kernels::best_isa(kernels::detect_cpu());
  ShardSpec a, b;
  a.slice = on_device;
  b.slice = on_cpu;
  Shard shards[2] = {Shard::load(file, info, a, device_options),
                     Shard::load(file, info, b, cpu_options)};
  EXPECT_NE(shards[0].device(), "cpu");
  EXPECT_EQ(shards[1].device(), "cpu");
  const std::vector<int32_t> tokens = read_tokens("../shared/" + model + ".1.tokens");
  SharedMemorySum shared(2);
  std::vector<float> logits[2];
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        ThreadPool pool(1);
        SharedMemoryRank sum(shared, rank);
        std::vector<float> out;
        for (size_t t0 = 0; t0 < tokens.size(); t0 += size_t(chunk)) {
          Batch batch;
          for (size_t t = t0; t < std::min(tokens.size(), t0 + size_t(chunk)); ++t) {
            batch.add(tokens[t], 0, int32_t(t), true);
          }
          shards[rank].forward(batch, nullptr, out, pool, &sum);
          logits[rank].insert(logits[rank].end(), out.begin(), out.end());
        }
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  return logits[0];
}

void expect_close_to_one_process(const std::string& model, const std::vector<float>& got) {
  LocalOptions options;
  options.n_ctx = 64;
  auto runner = LocalRunner::open("../shared/" + model + ".gguf", options);
  const std::vector<int32_t> tokens = read_tokens("../shared/" + model + ".1.tokens");
  const std::vector<float> want = forward_sequence(*runner, tokens, 0, 256, true);
  ASSERT_EQ(got.size(), want.size());
  double max_diff = 0, range = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(got[i]) - want[i]));
    range = std::max(range, std::fabs(double(want[i])));
  }
  EXPECT_LE(max_diff, 2e-3 * range) << model;
  std::printf("  %-30s max diff %.2e of %.2f\n", model.c_str(), max_diff, range);
}

// One stage over the GPU and the CPU of one machine: tensor-parallel halves (heads, FFN rows
// or experts, vocabulary split), and the placement for big MoE models, every expert on the
// CPU and the rest on the device: both are slices of the plans herd has, summed by the
// all-reduce, not a path of their own.
TEST(VulkanBackend, ARankOnTheDeviceAndARankOnTheCpuSumToTheWholeModel) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  for (const char* model : {"models/qwen3-f32", "models/qwen3moe-f32",
                            "models/frontier/gpt-oss-f32", "models/frontier2/glm4moe-f32"}) {
    SCOPED_TRACE(model);
    const HParams hp = info_of(model).hp;
    // Halves: rank 0 the first half of the heads (whole groups), FFN rows or experts; the
    // vocabulary on rank 0 (whose logits are compared).
    TensorSlice first, second;
    first.head_end = second.head_begin = hp.n_head / 2;
    first.kv_head_end = second.kv_head_begin = hp.n_head_kv / 2;
    second.vocab_begin = second.vocab_end = 0;
    if (hp.n_expert > 0) {
      // Expert-parallel halves (GLM's dense first layer and shared expert: on the rank
      // holding expert 0).
      first.experts.emplace();
      second.experts.emplace();
      for (int64_t e = 0; e < hp.n_expert; ++e) (e % 2 ? second : first).experts->push_back(e);
    } else {
      first.ff_end = second.ff_begin = hp.n_ff / 2;
    }
    expect_close_to_one_process(model, run_device_and_cpu(model, first, second, 256));
    if (hp.n_expert == 0) continue;
    // Every routed expert on the CPU, attention (and the head) on the device.
    TensorSlice device_part, cpu_part;
    device_part.experts.emplace();  // none
    cpu_part.head_end = cpu_part.kv_head_end = 0;
    cpu_part.vocab_end = 0;
    cpu_part.dense_ffn = false;  // GLM's dense layer and shared expert stay on the device
    expect_close_to_one_process(model, run_device_and_cpu(model, device_part, cpu_part, 256));
    expect_close_to_one_process(model, run_device_and_cpu(model, device_part, cpu_part, 1));
  }
}

// --experts cpu: the runner holds the two ranks above and runs them on every forward.
TEST(VulkanBackend, ExpertsOnTheCpuBesideTheDeviceThroughTheRunner) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  for (const char* model :
       {"models/qwen3moe-f16", "models/frontier2/glm4moe-q8_0", "models/frontier/deepseek2-q8_0"}) {
    SCOPED_TRACE(model);
    LocalOptions options;
    options.n_ctx = 64;
    options.device = test_device_name();
    options.experts = "cpu";
    auto runner = LocalRunner::open(std::string("../shared/") + model + ".gguf", options);
    ASSERT_NE(runner->cpu_experts(), nullptr);
    EXPECT_NE(runner->describe().find("routed experts on the CPU"), std::string::npos);
    // Against the reference, whole and in chunks of 7.
    for (int64_t chunk : {256, 7}) {
      check_model(model, {2, chunk, kernels::best_isa(kernels::detect_cpu()), -1,
                          test_device_name(), "cpu"});
    }
  }
  LocalOptions dense;
  dense.device = test_device_name();
  dense.experts = "cpu";
  EXPECT_THROW(LocalRunner::open("../shared/models/qwen3-f32.gguf", dense), Error);
  LocalOptions cpu;
  cpu.experts = "cpu";
  EXPECT_THROW(LocalRunner::open("../shared/models/qwen3moe-f32.gguf", cpu), Error);
}

// --device-layers: the first layers on the device, the rest and the head on the CPU, a
// pipeline of two stages in one process; against the reference.
TEST(VulkanBackend, FirstLayersOnTheDeviceTheRestOnTheCpu) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  for (const char* model :
       {"models/llama-q8_0", "models/frontier/gemma3-f32", "models/frontier2/qwen3next-f32"}) {
    SCOPED_TRACE(model);
    LocalOptions options;
    options.n_ctx = 64;
    options.device = test_device_name();
    options.device_layers = 1;
    auto runner = LocalRunner::open(std::string("../shared/") + model + ".gguf", options);
    EXPECT_NE(runner->describe().find("the rest on the CPU"), std::string::npos);
    for (int64_t chunk : {256, 5}) {
      Case c{2, chunk, kernels::best_isa(kernels::detect_cpu()), -1, test_device_name()};
      c.device_layers = 1;
      check_model(model, c);
    }
  }
  LocalOptions cpu;
  cpu.device_layers = 1;
  EXPECT_THROW(LocalRunner::open("../shared/models/llama-q8_0.gguf", cpu), Error);
}

// Gemma 4's q8_0 models (experts beside the dense FFN, values from the keys; per-layer
// inputs, KV-shared layers) in chunks of 8 (the f32 models go token by token above), and its
// first layer alone on the device (the per-layer inputs of some of the layers).
TEST(VulkanBackend, Gemma4InChunksAndItsFirstLayerOnTheDevice) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  const std::string device = test_device_name();
  for (const char* model : {"models/frontier2/gemma4-q8_0", "models/frontier2/gemma4e-q8_0"}) {
    check_model(model, {1, 8, kernels::Isa::kScalar, -1, device});
  }
  Case c{2, 256, kernels::best_isa(kernels::detect_cpu()), -1, device};
  c.device_layers = 1;
  check_model("models/frontier2/gemma4e-f32", c);
}

// Gemma 4's per-layer inputs in a stage after the first (the device stage embeds the tokens
// for them itself), its KV-shared layers and caches of two widths with two sequences in one
// batch: a CPU stage of layer 0, then the device stage of the rest, against one process.
TEST(VulkanBackend, Gemma4AsASecondStageWithTwoSequences) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  const std::string model = "models/frontier2/gemma4e-f32";
  const gguf::File file = gguf::File::open("../shared/" + model + ".gguf");
  const ModelInfo info = read_model_info(file);
  ShardOptions cpu_options;
  cpu_options.n_ctx = 64;
  cpu_options.n_seq = 2;
  ShardOptions device_options = cpu_options;
  device_options.device = {Device::kVulkan, 0};
  if (const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE")) {
    device_options.device.index = std::atoi(index);
  }
  Shard first = Shard::load(file, info, {0, 1, true, false, {}}, cpu_options);
  Shard second = Shard::load(file, info, {1, -1, false, true, {}}, device_options);
  ASSERT_NE(second.device(), "cpu");
  const std::vector<int32_t> a = read_tokens("../shared/" + model + ".1.tokens");
  const std::vector<int32_t> b = read_tokens("../shared/" + model + ".2.tokens");
  const int64_t n_vocab = info.hp.n_vocab;
  ThreadPool pool(1);
  std::vector<float> got_a, got_b, hidden, logits;
  auto step = [&](const Batch& batch) {
    first.forward(batch, nullptr, hidden, pool);
    second.forward(batch, hidden.data(), logits, pool);
    for (int64_t row = 0; row < batch.size(); ++row) {
      auto& got = batch.seq[size_t(row)] == 0 ? got_a : got_b;
      got.insert(got.end(), logits.begin() + row * n_vocab, logits.begin() + (row + 1) * n_vocab);
    }
  };
  // Prefixes of 3 and 5 tokens interleaved in one batch, then a token of each per batch.
  Batch prefix;
  for (int32_t i = 0; i < 5; ++i) {
    if (i < 3) prefix.add(a[size_t(i)], 0, i, true);
    prefix.add(b[size_t(i)], 1, i, true);
  }
  step(prefix);
  for (int32_t i = 3; i < int32_t(a.size()) && i + 2 < int32_t(b.size()); ++i) {
    Batch batch;
    batch.add(b[size_t(i + 2)], 1, i + 2, true);
    batch.add(a[size_t(i)], 0, i, true);
    step(batch);
  }
  ASSERT_GE(got_a.size(), size_t(6 * n_vocab));
  LocalOptions options;
  options.n_ctx = 64;
  for (const auto& [tokens, got] : {std::pair{&a, &got_a}, std::pair{&b, &got_b}}) {
    auto runner = LocalRunner::open("../shared/" + model + ".gguf", options);
    const std::vector<float> want = forward_sequence(*runner, *tokens, 0, 256, true);
    ASSERT_LE(got->size(), want.size());
    double max_diff = 0, range = 0;
    for (size_t i = 0; i < got->size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(double((*got)[i]) - want[i]));
      range = std::max(range, std::fabs(double(want[i])));
    }
    EXPECT_LE(max_diff, 2e-3 * range);
    std::printf("  %-30s second stage, two sequences: max diff %.2e of %.2f\n", model.c_str(),
                max_diff, range);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, VulkanReferenceLogits,
                         ::testing::ValuesIn(models_where(true)), model_test_name);

}  // namespace
}  // namespace herd::engine
