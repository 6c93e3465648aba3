// MtpHead: a model's multi-token-prediction head as a source of draft tokens (issue 31), beside
// prompt lookup and a draft model (speculative.h): DeepSeek V3's and GLM-4.5's NextN block,
// Qwen3.5's MTP layer, as their converters append them after the model's blocks
// (`{arch}.nextn_predict_layers`).
//
// One step, given the main model's hidden state h at position p (after its last layer,
// before the output norm: Shard::last_hidden) and the token t chosen for position p + 1:
//   x = eh_proj · [enorm(embed(t)) | hnorm(h)]      (the embedding first, as the references)
//   y = the NextN block's decoder layer on x at position p + 1, with the head's own KV cache
//   logits = head(shared_head_norm(y))             (nextn.shared_head_head, else the model's)
// The logits guess the token at p + 2. Chained, y is the next step's h and the guess its t.
//
// The head's KV cache has the main model's slots and context. Every position the main model
// keeps must pass through the head once (a prompt's, from position 0: its first token with no
// hidden state, MtpInput), or its attention reads rows never written. Rows written past a
// sequence's kept positions (a rejected draft's) are overwritten by the next write at that
// position, as in the main cache, so nothing needs cutting back.
//
// A file with several NextN blocks (nextn_predict_layers > 1) drafts with the first, chained,
// as the references do by default.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/shard.h"
#include "gguf/reader.h"
#include "kernels/matmul.h"
#include "model/model_info.h"
#include "util/thread_pool.h"

namespace herd::engine {

// One row the head runs: the main model's hidden state at position `pos` of slot `seq` and
// the token chosen for position pos + 1. A sequence's first token has no state before it: pos
// -1 and no hidden state (a zero one), as the references warm the head up on a prompt.
struct MtpInput {
  int32_t seq = 0;
  int32_t pos = 0;
  const float* hidden = nullptr;  // [n_embd], valid for the call; null: zeros
  int32_t token = 0;
};

// A slot's greedy draft: the tokens the head guesses for positions pos + 2, pos + 3, ...
// after its last input row.
struct MtpDraft {
  int32_t seq = 0;
  std::vector<int32_t> tokens;
};

class MtpHead {
 public:
  // Loads the first NextN block of the model in `file` (info.hp.n_nextn > 0; the file must
  // outlive the head) on the CPU, with options' context, slots, ISA, batch and threads; only the
  // block's own weights and its eh_proj / head are read. Throws herd::Error when the model
  // has no NextN block or its kind of attention has no head here (compressed attention,
  // hyper-connections).
  // model_head: the main model's output head (Shard::output_head), which the head then reads
  // in place of a copy of its own where the file has no nextn.shared_head_head; it must have
  // every vocabulary row and outlive the head.
  static MtpHead load(const gguf::File& file, const ModelInfo& info, ShardOptions options,
                      const kernels::PackedMatrix* model_head = nullptr);

  MtpHead(MtpHead&&) noexcept;
  MtpHead& operator=(MtpHead&&) noexcept;
  ~MtpHead();

  // Runs the head over `rows` in one batch, each at position pos + 1 of its slot (its KV row
  // there written). logits: resized to [n][n_vocab]; hidden: to [n][n_embd], the head's own
  // hidden states (a chained step's input). Throws herd::Error as Shard::forward does (a slot
  // or position outside the cache, a token outside the vocabulary).
  void forward(std::span<const MtpInput> rows, std::vector<float>& logits,
               std::vector<float>& hidden, ThreadPool& pool);

  // Greedy drafts of up to k tokens per slot: runs `rows` (forward; several rows of a slot
  // are consecutive positions, e.g. a prompt or a verified draft), then chains the head from
  // each slot's last row, all slots in one batch per step. drafts: one per slot, in the
  // order of their first row; shorter than k only where the context ends. The vector and its
  // token vectors are reused: a caller that keeps them allocates nothing once warm
  // (decode_alloc_test).
  void draft(std::span<const MtpInput> rows, int k, std::vector<MtpDraft>& drafts,
             ThreadPool& pool);

  int64_t n_embd() const;
  int64_t n_vocab() const;
  int64_t n_ctx() const { return shard_.n_ctx(); }

 private:
  MtpHead(Shard shard, const HParams& hp);

  Shard shard_;  // the NextN block: layers [n_layer, n_layer + 1) of mtp_model_info
  int64_t n_embd_ = 0, n_vocab_ = 0;
  float rms_eps_ = 0, final_softcap_ = 0;
  const gguf::TensorInfo* embed_ = nullptr;              // nextn.embed_tokens, else token_embd
  std::vector<float> enorm_, hnorm_, shared_head_norm_;  // [n_embd]
  kernels::PackedMatrix eh_proj_;                        // [n_embd x 2 n_embd]
  // [n_vocab x n_embd]: the main model's head (not owned), else shared_head_head or a copy
  // of the model's.
  const kernels::PackedMatrix* shared_head_ = nullptr;
  kernels::PackedMatrix own_head_;
  kernels::Workspace workspace_;
  // Per call: the batch, [n][2 n_embd] normed inputs, [n][n_embd] projected / normed rows.
  Batch batch_;
  std::vector<float> joined_, projected_, normed_;
  // draft()'s chains: per slot its last row, that row's place in the step's output (-1:
  // ended) and its hidden state [slots][n_embd]; the step's inputs, logits and hidden states.
  std::vector<MtpInput> chain_;
  std::vector<int64_t> chain_rows_;
  std::vector<float> chain_hidden_;
  std::vector<MtpInput> inputs_;
  std::vector<float> step_logits_, step_hidden_;
};

}  // namespace herd::engine
