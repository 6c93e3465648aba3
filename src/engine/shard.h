// Shard: a contiguous range of a model's layers, optionally with the token embedding in
// front and the output norm and head behind, with its weights and KV cache. One machine
// running a whole model runs the one shard that has everything (the one-stage plan);
// a pipeline stage runs one of several. forward() is the whole forward pass.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/batch.h"
#include "engine/kv_cache.h"
#include "gguf/reader.h"
#include "kernels/matmul.h"
#include "model/model_info.h"
#include "util/thread_pool.h"

namespace herd::engine {

struct ShardSpec {
  int64_t layer_begin = 0;
  int64_t layer_end = -1;  // exclusive; -1: through the last layer
  bool embedding = true;   // the shard turns token ids into activations
  bool output = true;      // the shard ends with the output norm and head (logits)
};

struct ShardOptions {
  int64_t n_ctx = 0;  // positions per sequence; 0: the model's context length
  int64_t n_seq = 1;  // sequence slots in the KV cache
  kernels::Isa isa = kernels::Isa::kScalar;
};

class Shard {
 public:
  // Binds (and repacks where the kernels want it) the weights of `spec` from `file`, which
  // must outlive the shard, and allocates the KV cache. Throws herd::Error on a bad spec.
  static Shard load(const gguf::File& file, const ModelInfo& info, const ShardSpec& spec,
                    const ShardOptions& options);

  Shard(Shard&&) noexcept;
  Shard& operator=(Shard&&) noexcept;
  ~Shard();

  // Runs the batch through the shard's layers.
  // input: [n][n_embd] activations from the previous shard (ignored when the shard has the
  // embedding: then the batch's token ids are embedded).
  // output: resized to [n_logits][n_vocab] logits (rows in batch order of the tokens that
  // want logits) when the shard has the output head, else [n][n_embd] activations.
  // Throws herd::Error when a position is outside the context or a slot does not exist.
  void forward(const Batch& batch, const float* input, std::vector<float>& output,
               ThreadPool& pool);

  const HParams& hparams() const;
  const ShardSpec& spec() const;
  int64_t n_ctx() const;
  int64_t n_seq() const;
  size_t kv_cache_bytes() const;
  size_t packed_weight_bytes() const;  // bytes of repacked copies the shard owns

 private:
  struct State;
  explicit Shard(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace herd::engine
