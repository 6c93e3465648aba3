// Shard: a contiguous range of a model's layers, optionally with the token embedding in
// front and the output norm and head behind, with its weights and KV cache. One machine
// running a whole model runs the one shard that has everything (the one-stage plan);
// a pipeline stage runs one of several. forward() is the whole forward pass.
//
// A shard may also be one tensor-parallel rank of a stage (ShardSpec::slice): it then holds
// only its slice of each layer's query heads, KV heads, FFN rows, experts and output-head
// rows, and forward() all-reduces the partial sums of the attention output and FFN down
// projections with the stage's other ranks. The slice is data: the same forward pass runs
// a whole model and a rank.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/all_reduce.h"
#include "engine/batch.h"
#include "engine/device.h"
#include "engine/kv_cache.h"
#include "gguf/reader.h"
#include "kernels/matmul.h"
#include "model/model_info.h"
#include "model/tensor_slice.h"
#include "util/thread_pool.h"

namespace herd::engine {

// The part of the model a tensor-parallel rank holds (model/tensor_slice.h).
using TensorSlice = herd::TensorSlice;

struct ShardSpec {
  int64_t layer_begin = 0;
  int64_t layer_end = -1;  // exclusive; -1: through the last layer
  bool embedding = true;   // the shard turns token ids into activations
  bool output = true;      // the shard ends with the output norm and head (logits)
  TensorSlice slice;       // default: everything (not tensor-parallel)
};

struct ShardOptions {
  int64_t n_ctx = 0;  // positions per sequence; 0: the model's context length
  int64_t n_seq = 1;  // sequence slots in the KV cache
  kernels::Isa isa = kernels::Isa::kScalar;
  // Scratch is allocated at load for batches of up to n_batch tokens (a larger batch grows
  // it once) and attention split for n_threads threads.
  int64_t n_batch = 256;
  int n_threads = 1;
  // Multi-head latent attention: a batch of one sequence's consecutive tokens attends with
  // each head's keys and values decompressed from the latent (shard_mla_prefill.cpp) when
  // that takes fewer operations than the absorbed form. -1: by that count; 0: never; n > 0:
  // whenever the batch has at least n tokens (tests).
  int64_t mla_decompress_min_tokens = -1;
  // Where the forward pass runs (backend.h). A device shard uploads its weights at load
  // (upload_progress reports the bytes) and keeps no repacked copy on the host.
  Device device;
  UploadProgress upload_progress;
};

// What a shard allocates besides its weights, known before loading it (the planner's
// memory estimate reads it).
struct ShardSizes {
  int64_t n_ctx = 0;
  // The cache's shape: each layer's kind and row widths, the slots, the recurrent state
  // (compressed attention: no layers; its state is counted in kv_bytes).
  CacheLayout cache;
  size_t kv_bytes = 0;  // the cache: KV rows of attention layers, recurrent states of linear ones
  size_t scratch_bytes = 0;  // buffers of the forward pass for n_batch tokens
};

class Shard {
 public:
  // Binds (and repacks where the kernels want it) the weights of `spec` from `file`, which
  // must outlive the shard, and allocates the KV cache. Only the slice's rows and columns
  // are packed (column slices of attn_output / ffn_down are copied out of the file first),
  // and the KV cache holds only the slice's KV heads. A file that holds a rank's cut
  // already (info.file_slice) is read as that part of the model: its tensors must contain
  // the spec's slice, and a file cut for exactly this slice is packed without slicing. Throws
  // herd::Error on a bad spec: a range outside the model, KV heads that miss one the query heads
  // read, or a column slice that cuts a quant block (the message names the tensor). The returned
  // spec() has every -1 end resolved.
  static Shard load(const gguf::File& file, const ModelInfo& info, const ShardSpec& spec,
                    const ShardOptions& options);

  // The KV cache and scratch a shard of this spec would allocate. Throws as load() does
  // on a bad slice.
  static ShardSizes sizes(const ModelInfo& info, const ShardSpec& spec,
                          const ShardOptions& options);

  Shard(Shard&&) noexcept;
  Shard& operator=(Shard&&) noexcept;
  ~Shard();

  // Runs the batch through the shard's layers.
  // input: [n][n_embd] activations from the previous shard (ignored when the shard has the
  // embedding: then the batch's token ids are embedded; every rank of a tensor-parallel
  // embedding stage embeds them itself).
  // output: resized to [n_logits][vocab_end - vocab_begin] logits (rows in batch order of
  // the tokens that want logits; columns the slice's vocabulary rows, all n_vocab for a
  // whole shard) when the shard has the output head, else [n][n_embd] activations.
  // all_reduce: null for a whole shard; for a tensor-parallel rank, the sum over the
  // stage's ranks, called twice per layer (three times where the q / k norm is over the
  // whole row: first its sums of squares). Every rank of the stage runs forward() with the
  // same batch and input, and ends with the same full [n][n_embd] hidden state; the
  // coordinator concatenates the ranks' logits in vocabulary order.
  // Throws herd::Error when a position is outside the context or a slot does not exist,
  // when a shard with a slice of its layers' heads / FFN rows / experts gets no all_reduce,
  // or when the all-reduce fails (a rank that throws leaves its peers waiting in theirs:
  // the cluster must fail their connections).
  void forward(const Batch& batch, const float* input, std::vector<float>& output, ThreadPool& pool,
               AllReduce* all_reduce = nullptr);

  // [n][n_embd] the hidden state after the shard's last layer (before the output norm) of
  // every row of the last forward(), valid until the next one: an MTP head's input
  // (mtp_head.h). Empty before a forward, on a device, and with hyper-connections (the
  // head reduces their streams in place).
  std::span<const float> last_hidden() const;
  // The output head as the CPU kernels read it ([vocab_end - vocab_begin][n_embd]), or null
  // when the shard has no head or runs on a device: an MTP head shares it (mtp_head.h).
  const kernels::PackedMatrix* output_head() const;
  const HParams& hparams() const;
  const ShardSpec& spec() const;
  bool is_sliced() const;  // holds less than every head, FFN row, expert or vocabulary row
  int64_t n_ctx() const;
  int64_t n_seq() const;
  size_t kv_cache_bytes() const;
  // Linear-attention layers' states of a slot (kv_cache.h): whether the shard has any, and
  // a copy of them / their restoring (snapshots of a shard of the same spec).
  bool has_recurrent_state() const;
  RecurrentSnapshot snapshot_state(int32_t seq) const;
  void restore_state(int32_t seq, const RecurrentSnapshot& snapshot);
  // Bytes of weight copies the shard owns: repacked matrices, and column slices cut out of
  // the file for kernels that read the GGUF layout in place.
  size_t packed_weight_bytes() const;
  // Where the forward pass runs: "cpu", or the device backend's description.
  std::string device() const;
  size_t device_bytes() const;  // device memory held (0 on the CPU)
  int device_index() const;     // the Vulkan device's index; -1: the CPU

 public:
  struct State;  // engine-internal (shard_state.h)

 private:
  explicit Shard(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace herd::engine
