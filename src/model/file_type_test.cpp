#include "model/file_type.h"

#include <gtest/gtest.h>

#include "gguf/reader.h"

namespace herd {
namespace {

TEST(FileType, ParsesNames) {
  EXPECT_EQ(find_file_type("Q4_K_M")->gguf_id, 15u);
  EXPECT_EQ(find_file_type("q8_0")->base, TensorType::Q8_0);
  EXPECT_FALSE(find_file_type("q9_9").has_value());
}

// iq4 mixes are plain (every 2-D weight in the type, as `llama-quantize --pure`); an iq4_xs
// row that is not a whole number of 256-blocks falls back to iq4_nl, as in llama.cpp.
TEST(FileType, Iq4Mixes) {
  HParams hp;
  hp.n_layer = 2;
  const FileType xs = *find_file_type("IQ4_XS");
  EXPECT_EQ(xs.gguf_id, 30u);
  EXPECT_EQ(find_file_type("iq4_nl")->gguf_id, 25u);
  TensorSpec t{"blk.0.ffn_down.weight", {512, 128}, TensorRole::kFfnDown, 0};
  EXPECT_EQ(tensor_type_for(xs, t, hp), TensorType::IQ4_XS);
  t.shape = {128, 512};
  EXPECT_EQ(tensor_type_for(xs, t, hp), TensorType::IQ4_NL);
  t.shape = {48, 48};
  EXPECT_EQ(tensor_type_for(xs, t, hp), TensorType::F16);
}

TEST(FileType, RowsThatBreakBlocksFallBack) {
  HParams hp;
  hp.n_layer = 2;
  FileType q4km = *find_file_type("q4_k_m");
  TensorSpec t{"blk.0.attn_q.weight", {128, 128}, TensorRole::kAttention, 0};
  EXPECT_EQ(tensor_type_for(q4km, t, hp), TensorType::Q5_0);  // 128 % 256 != 0
  t.shape = {48, 48};
  EXPECT_EQ(tensor_type_for(*find_file_type("q4_0"), t, hp), TensorType::F16);
  TensorSpec norm{"blk.0.attn_norm.weight", {256}, TensorRole::kNorm, 0};
  EXPECT_EQ(tensor_type_for(q4km, norm, hp), TensorType::F32);
}

// The tensors of gpt-oss and deepseek2 in the Q4_K_M mix: biases (also 2-D per-expert ones),
// the selection bias and the router stay F32; attn_k_b's rows are the nope part of a key
// (128 in V3: Q5_0; 44: no quant block fits, F16).
TEST(FileType, NewArchitectureTensors) {
  HParams hp;
  hp.n_layer = 4;
  FileType q4km = *find_file_type("q4_k_m");
  TensorSpec bias{"blk.0.ffn_gate_exps.bias", {64, 8}, TensorRole::kBias, 0};
  EXPECT_EQ(tensor_type_for(q4km, bias, hp), TensorType::F32);
  TensorSpec sel{"blk.1.exp_probs_b.bias", {8}, TensorRole::kBias, 1};
  EXPECT_EQ(tensor_type_for(q4km, sel, hp), TensorType::F32);
  TensorSpec router{"blk.1.ffn_gate_inp.weight", {256, 8}, TensorRole::kRouter, 1};
  EXPECT_EQ(tensor_type_for(q4km, router, hp), TensorType::F32);
  TensorSpec k_b{"blk.1.attn_k_b.weight", {128, 512 * 4}, TensorRole::kAttention, 1};
  EXPECT_EQ(tensor_type_for(q4km, k_b, hp), TensorType::Q5_0);
  k_b.shape = {44, 128 * 4};
  EXPECT_EQ(tensor_type_for(q4km, k_b, hp), TensorType::F16);
  EXPECT_EQ(tensor_type_for(*find_file_type("q8_0"), k_b, hp), TensorType::F16);
  TensorSpec exps{"blk.1.ffn_up_exps.weight", {256, 64, 8}, TensorRole::kExperts, 1};
  EXPECT_EQ(tensor_type_for(q4km, exps, hp), TensorType::Q4_K);
}

// The shared Q4_K_M file was made by llama.cpp's quantizer: our rule must pick the same
// type for every tensor of the same model.
TEST(FileType, MatchesReferenceQ4KMFile) {
  gguf::File f = gguf::File::open("../shared/models/llama-q4_k_m.gguf");
  HParams hp;
  hp.n_layer = f.get_u32("llama.block_count");
  hp.tied_output = f.find_tensor("output.weight") == nullptr;
  hp.n_embd = f.get_u32("llama.embedding_length");
  hp.n_ff = f.get_u32("llama.feed_forward_length");
  hp.n_head = f.get_u32("llama.attention.head_count");
  hp.n_head_kv = f.get_u32("llama.attention.head_count_kv");
  hp.head_dim = hp.n_embd / hp.n_head;
  hp.head_dim_v = hp.n_rot = hp.head_dim;
  hp.n_vocab = static_cast<int64_t>(f.get_string_array("tokenizer.ggml.tokens").size());
  FileType q4km = *find_file_type("q4_k_m");
  for (const TensorSpec& t : model_tensors(*find_arch("llama"), hp)) {
    const gguf::TensorInfo& info = f.tensor(t.name);
    EXPECT_EQ(info.shape, t.shape) << t.name;
    EXPECT_EQ(type_traits(tensor_type_for(q4km, t, hp)).name, type_traits(info.type).name)
        << t.name;
  }
}

}  // namespace
}  // namespace herd
