// The Vulkan backend of a shard (backend.h): its weights uploaded once in their GGUF layout,
// its F16 KV cache and its activations in device memory, and a forward pass that records
// every operation of a step (vulkan/kernels.h) into one command buffer and submits it once.
// vulkan_backend.cpp loads; vulkan_forward.cpp records the forward pass. Internal to the
// engine module; built only where herd is built with Vulkan (else vulkan_backend_stub.cpp).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/shard_state.h"
#include "vulkan/kernels.h"

namespace herd::engine {

// A matrix (or a stack of experts' matrices) in its GGUF layout on the device.
struct DeviceMatrix {
  TensorType type = TensorType::F32;
  int64_t rows = 0, cols = 0;  // of one expert's matrix for a stack
  int64_t n_expert = 0;        // matrices in a stack; 0: one plain matrix
  vulkan::Buffer buffer;
};

// A layer's weights on the device, by the member of engine::Layer they mirror; a vector or
// matrix the layer does not have is absent (has()).
struct DeviceLayer {
  const Layer* host = nullptr;  // options, rope, scale; its matrices are not read
  std::map<LayerWeight, DeviceMatrix> matrices;
  std::map<LayerWeight, vulkan::Buffer> vectors;  // floats, as the host Layer holds them
  vulkan::Buffer k_cache, v_cache;                // F16 [n_seq][n_ctx][kv_dim]
  vulkan::Buffer states;  // a linear layer's: [n_seq][RecurrentShape::floats()] (kv_cache.h)
  int rope_group = 0;     // the angles it reads (layers with the same rope share them)
  // Its cache rows' width, and where its tokens' rows are: -1 k_rows_ (the width kv_dim_),
  // else width_rows_[rows_group] (Gemma 4's layers of other widths).
  int64_t kv_dim = 0;
  int rows_group = -1;
  // The layer (index in layers_) whose cache its attention reads: itself, or for Gemma 4's
  // KV-shared layers an earlier one (which has the caches; this one has none).
  size_t kv_layer = 0;
  bool has(LayerWeight w) const { return matrices.count(w) + vectors.count(w) > 0; }
  const DeviceMatrix& matrix(LayerWeight w) const { return matrices.at(w); }
  const vulkan::Buffer& vector(LayerWeight w) const { return vectors.at(w); }
};

// A Vulkan device opened once per process and shared by the shards on it (the stages of a
// pipeline run here, tests opening many models): its context, its kernels with their
// compiled pipelines, and a lock, as one queue takes one submission at a time.
struct VulkanRuntime {
  std::unique_ptr<vulkan::Context> context;
  std::unique_ptr<vulkan::Kernels> kernels;
  std::mutex mutex;  // held while a forward records and runs
};
std::shared_ptr<VulkanRuntime> vulkan_runtime(int index);

class VulkanBackend : public DeviceBackend {
 public:
  VulkanBackend(const Shard::State& s, const gguf::File& file, const ModelInfo& info, int index,
                const UploadProgress& progress);
  void forward(const Batch& batch, const float* input, std::vector<float>& output,
               AllReduce* all_reduce) override;
  std::string describe() const override;
  size_t device_bytes() const override { return device_bytes_; }
  void download_states(int32_t seq, std::vector<float>& rows) override;
  void upload_states(int32_t seq, const std::vector<float>& rows) override;

 private:
  // Activations for up to `capacity` tokens (grown by a larger batch, never shrunk).
  void reserve(int64_t n);
  vulkan::Buffer make_buffer(size_t bytes, const std::string& what,
                             vulkan::BufferKind kind = vulkan::BufferKind::kDevice);
  // Records y = W x for n tokens ([n][cols] -> [n][rows]).
  void mul(const DeviceMatrix& w, const vulkan::Buffer& x, const vulkan::Buffer& y, int64_t n);
  // Records one layer of the batch (attention, then the FFN) on x.
  void record_attention(const DeviceLayer& l, const Batch& batch);
  void record_ffn(const DeviceLayer& l, int64_t n);
  // Gated DeltaNet (vulkan_delta.cpp): a linear-attention layer from x to its residual add;
  // the queries of a gated attention output (q_ and attn_gate_ from h); the gate of a gated
  // shared expert on its output `shared` [n][n_embd]; the buffers reserve() makes for them.
  void record_linear(const DeviceLayer& l, const Batch& batch);
  void record_gated_query(const DeviceLayer& l, int64_t n);
  void record_shared_expert_gate(const DeviceLayer& l, const vulkan::Buffer& shared, int64_t n);
  void reserve_delta(int64_t n);
  size_t recurrent_layers() const;  // the layers with recurrent states
  // Multi-head latent attention in its absorbed form, from h into attn [n][n_head][hdv].
  void record_mla(const DeviceLayer& l, const Batch& batch);
  // Attention of every token over its slot's cached positions, per run of one sequence's
  // consecutive positions: q [n][n_head][k_dim] into out [n][n_head][v_dim]; keys and values
  // in the layer's cache (MLA: the values are the keys' first v_dim).
  void record_attend(const DeviceLayer& l, const Batch& batch, const vulkan::Buffer& q,
                     const vulkan::Buffer& out, int64_t k_dim, int64_t v_dim, int64_t n_kv,
                     int64_t head_stride, bool values_in_keys);
  // The attention's summed output proj: its bias, sandwich norm and the residual add.
  void add_attention_output(const DeviceLayer& l, int64_t n);
  // proj [n][n_embd] summed over the stage's ranks (a tensor-parallel slice): the recording
  // so far runs, proj comes to the host for the all-reduce and goes back, and a new recording
  // begins. zeros: this rank contributes nothing (no heads, no FFN rows) and proj is not read.
  void reduce_projection(int64_t n, bool zeros);
  AllReduce* all_reduce_ = nullptr;  // this forward's
  void record_gated(const DeviceMatrix& gate, const DeviceMatrix& up, const DeviceMatrix& down,
                    int64_t n, float limit, const vulkan::Buffer& out);
  void record_experts(const DeviceLayer& l, int64_t n);
  // The chosen experts' products of h for the slots in ids_ (gate, up, their biases, the
  // activation, down and its bias): expert_out_ [n][n_used][n_embd].
  void record_expert_products(const DeviceLayer& l, int64_t n);
  vulkan::RouterShape router_shape(int64_t n) const;  // this model's routing of n tokens
  // Gemma 4 (vulkan_gemma4.cpp): attention of the layer's own shapes (keys and values of
  // its width, values from the keys, value norms, another layer's cache); the experts beside
  // the dense FFN into proj; the per-layer inputs of the batch (host: the embedding rows of
  // its tokens into `up`; device: their projection, from the step's upload at float `at`)
  // and, after a layer, its per-layer input and output scale on x.
  void prepare_layer_shapes();  // at load: widths, cache rows, checks
  void record_shaped_attention(const DeviceLayer& l, const Batch& batch);
  void record_moe_beside_dense(const DeviceLayer& l, int64_t n);
  void gather_per_layer_rows(const Batch& batch, float* up) const;
  void record_per_layer_inputs(int64_t n, size_t at);
  void record_layer_end(const DeviceLayer& l, int64_t n);
  const vulkan::Buffer& cache_rows(const DeviceLayer& l) const {
    return l.rows_group < 0 ? k_rows_ : width_rows_[size_t(l.rows_group)];
  }

  // DeepSeek V4 (vulkan_ds4.cpp): hyper-connections around every sublayer and before the
  // head, compressed attention, hash-routed experts; its caches, scratch and step uploads.
  struct Ds4;
  void load_ds4();
  void reserve_ds4(int64_t n);
  void begin_ds4(const Batch& batch);
  void record_ds4_layer(const DeviceLayer& l, const Batch& batch);
  void record_compressed(const DeviceLayer& l, const Batch& batch);
  void record_hash_route(const DeviceLayer& l, int64_t n);
  void record_hc_head(int64_t n);

  const Shard::State& s_;
  std::shared_ptr<VulkanRuntime> runtime_;  // outlives every buffer below
  vulkan::Context* context_ = nullptr;
  vulkan::Kernels* kernels_ = nullptr;
  std::unique_ptr<vulkan::Recorder> recorder_;
  size_t device_bytes_ = 0;      // weights, caches and activations
  size_t activation_bytes_ = 0;  // of them, the buffers reserve() makes
  int64_t n_embd_ = 0, q_dim_ = 0, kv_dim_ = 0, max_ff_ = 0;
  bool mla_ = false;  // multi-head latent attention (vulkan_mla.cpp)
  std::vector<DeviceLayer> layers_;
  DeviceMatrix output_;
  vulkan::Buffer output_norm_;
  // MoE, where the shard holds some experts: [n_expert] uint32 index into its stacks, or
  // 0xffffffff (Kernels::remap_experts). Empty when it holds every expert.
  vulkan::Buffer expert_index_;
  std::vector<const Rope*> ropes_;  // one per rope group
  int64_t max_rot_ = 0;

  // Per batch, [capacity] rows: the residual stream x, the normed h, q, k, v, the heads'
  // outputs, a projection back to n_embd, the FFN's gate and up (of every used expert),
  // router logits, chosen experts and their weights, the experts' outputs, logits.
  int64_t capacity_ = 0;
  vulkan::Buffer x_, h_, q_, k_, v_, attn_, proj_, ffn_a_, ffn_b_, shared_, logits_, ids_, weights_,
      expert_out_, out_;
  std::vector<vulkan::Buffer> angles_;  // per rope group [capacity][n_rot]: cos, then sin
  vulkan::Buffer k_rows_;               // [capacity] element offsets into the caches
  // Gemma 4: the cache widths other than kv_dim_, and per width [capacity] offsets.
  std::vector<int64_t> row_widths_;
  std::vector<vulkan::Buffer> width_rows_;
  // Gemma 4's per-layer inputs: P = n_embd_per_layer; their projection [layers P x n_embd]
  // and norm (times 1/sqrt 2); per batch [capacity][layers][P] inputs and a scratch as
  // large, and [capacity][P] of a layer's gate. Its experts' scales: [capacity][n_used] of
  // the chosen experts' and the router's weights times them. A weightless norm's ones.
  int64_t per_layer_ = 0;
  DeviceMatrix per_layer_proj_;
  vulkan::Buffer per_layer_norm_, per_layer_in_, per_layer_tmp_, per_layer_gate_;
  vulkan::Buffer expert_scales_, scaled_weights_, ones_;
  // MLA: [n][q_lora] (and the latent being normed), [n][n_head][nope], [n][n_head][kv_lora],
  // [n][n_head][kv_lora + n_rot] queries in latent space, [n][n_head] head ids.
  vulkan::Buffer mla_a_, mla_nope_, mla_lat_, mla_q_, head_ids_;
  // Gated DeltaNet: [n][conv_dim] qkv and its conv, [n][n_v dv] z and the rule's output,
  // [n][2 n_v] beta's and alpha's projections (b | alpha fused, else b here and alpha in
  // delta_alpha_); the gated attention's [n][n_head][2 hd] q | gate rows and [n][q_dim]
  // gates; the gated shared expert's [n] logits.
  vulkan::Buffer delta_qkv_, delta_conv_, delta_z_, delta_out_, delta_b_, delta_alpha_;
  vulkan::Buffer gate_q_, attn_gate_, shexp_logits_;
  vulkan::Buffer scores_;  // the attention's scores, scores_floats_ of them
  int64_t scores_floats_ = 0;
  // Host-visible: what a step sends (input, angles, cache rows) and what it brings back.
  vulkan::Buffer upload_, download_;
  std::vector<size_t> angles_at_;  // per rope group: where its angles start in the upload
  std::shared_ptr<Ds4> ds4_;       // DeepSeek V4's state (shared_ptr: complete only there)
};

}  // namespace herd::engine
