// Architectures as rows of one table of options, plus the per-layer options a model's
// hyper-parameters give each block. The forward pass, the synthesizer, the loader, the
// tensor-parallel slicer and the planner read these switches and the one tensor list
// model_tensors() derives from them; nothing outside this table branches on an
// architecture name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace herd {

// How rope rotates a head's dimensions.
enum class RopeStyle {
  kAdjacentPairs,  // (x0, x1), (x2, x3), ...: GPT-J / llama "normal" rope
  kNeoxHalves,     // (x0, x_{d/2}), (x1, x_{d/2+1}), ...: NeoX rope (qwen2, qwen3)
};

// How a layer's attention reads its keys and values.
enum class AttentionKind {
  kGqa,  // attn_q / attn_k / attn_v: grouped-query (multi-head when n_head_kv == n_head)
  kMla,  // DeepSeek's multi-head latent attention: one cached latent + rope key per token
};

// Where a layer's RMSNorms sit.
enum class NormPlacement {
  kPre,       // x += f(norm(x)) (llama)
  kSandwich,  // x += norm(f(norm(x))): the branch's output is normed too (Gemma 2/3)
};

// The gated activation of the FFN: act(gate) * up.
enum class Activation {
  kSilu,       // silu(g) * u (SwiGLU)
  kGeluTanh,   // gelu(g) * u with the tanh approximation (GeGLU, Gemma)
  kSwigluOai,  // gpt-oss: g = min(g, 7), u = clamp(u, -7, 7), g * sigmoid(1.702 g) * (u + 1)
};

// How the router turns its logits into expert probabilities.
enum class Gating { kSoftmax, kSigmoid };

// How rope angles are stretched beyond the training context.
enum class RopeScaling { kNone, kLinear, kYarn };

// What `herd synth` writes for an architecture when its options do not say: the settings
// of the real models of the family, at any size.
struct SynthDefaults {
  Gating gating = Gating::kSoftmax;
  int64_t n_expert = 8;
  int64_t n_expert_used = 2;
  int64_t n_expert_shared = 0;
  int64_t n_leading_dense = 0;  // at most n_layer - 1
  float expert_weights_scale = 1.0f;
  bool tied_output = false;
  // Rope scaling of the real models, written unless --rope-scaling says otherwise.
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_factor = 1.0f;
  int64_t rope_original_ctx = 0;
  float yarn_log_multiplier = 0.0f;
  int64_t n_nextn = 0;  // NextN (MTP) blocks, as the family's converter appends them
  // Attention window of the local layers: at most this, and at most n_ctx / window_ctx_div
  // (rows with sliding-window layers only).
  int64_t sliding_window = 0;
  int64_t window_ctx_div = 1;
  // Proportional rope (Gemma 4's global layers): the first fraction of the pairs rotate,
  // the others get rope_freqs divisors of 1e30; 0: no rope_freqs written.
  float rope_freqs_rotated = 0.0f;
  // Rows with per-layer shapes (layer_shapes): every sliding_period-th layer is global,
  // whose head size is global_head_dim_mul times the sliding layers' and whose KV heads
  // are the sliding layers' divided by global_kv_div.
  int64_t sliding_period = 0;
  int64_t global_head_dim_mul = 1;
  int64_t global_kv_div = 1;
};

// One architecture: every switch the loader, the forward pass, the slicer and the synthesizer
// read, named, with the default (llama's behaviour) for what a row does not say.
struct ArchSpec {
  std::string_view name;  // general.architecture
  RopeStyle rope_style = RopeStyle::kAdjacentPairs;
  AttentionKind attention = AttentionKind::kGqa;
  NormPlacement norm = NormPlacement::kPre;
  Activation activation = Activation::kSilu;
  bool qkv_bias = false;           // attn_q/k/v carry biases (qwen2, gpt-oss)
  bool output_bias = false;        // attn_output carries a bias (gpt-oss)
  bool qk_norm = false;            // per-head RMSNorm of q and k before rope (qwen3, gemma3)
  bool attn_sinks = false;         // attn_sinks: a per-head logit with no value in the softmax
  bool moe = false;                // FFN is a mixture of experts (after leading_dense_block_count)
  bool expert_bias = false;        // router and experts carry biases (gpt-oss)
  bool explicit_head_dim = false;  // head size from attention.key_length, not n_embd / n_head
  bool embed_scale = false;        // token embeddings are multiplied by sqrt(n_embd) (Gemma)
  // Sliding-window layers: with a window, layer il is global iff (il + 1) % swa_period == 0
  // (Gemma 3: 6, five local then one global; gpt-oss: 2, local and global alternating).
  // 0: every layer global even when the file names a window.
  int swa_period = 0;
  // Rope base of the sliding-window layers, which also skip rope scaling (Gemma 3: 10000);
  // 0: the same rope as the global layers.
  float swa_rope_base = 0.0f;
  // DeepSeek's YaRN: the magnitude correction goes on the attention logits
  // (mscale^2 / sqrt(head_dim), mscale = 1 + yarn_log_multiplier ln(factor)), not on
  // rope's cos and sin (which ggml's rope applies as 1 + 0.1 ln(factor) otherwise).
  bool yarn_scale_on_logits = false;
  // Gemma 4: attention logits are q . k unscaled (its q and k norms set their size).
  bool unit_attention_scale = false;
  // Gemma 4: each value head goes through an RMSNorm without weight.
  bool v_norm = false;
  // Gemma 4: the attention shapes, FFN widths and kinds of the layers come from the file:
  // attention.sliding_window_pattern (required), key_length_swa / value_length_swa,
  // rope.dimension_count_swa and rope.freq_base_swa of the sliding layers,
  // attention.head_count_kv and feed_forward_length as per-layer arrays,
  // attention.shared_kv_layers (the last layers reuse an earlier layer's keys and values)
  // and embedding_length_per_layer_input (required; > 0: per-layer inputs). rope_freqs
  // divides the angles of the global layers only.
  bool layer_shapes = false;
  // Gemma 4: experts when the file names expert_count (26B-A4B; E2B / E4B / 31B are dense),
  // beside the layer's dense FFN rather than instead of it: the router reads
  // RMSNorm(x) * ffn_gate_inp.scale / sqrt(n_embd), the experts RMSNorm(x) * pre_ffw_norm_2
  // through fused ffn_gate_up_exps and ffn_down_exps times ffn_down_exps.scale[e]; the two
  // outputs are normed (post_ffw_norm_1 / _2) and added before post_ffw_norm.
  bool moe_beside_dense = false;
  // Gemma 4: layer_output_scale: the residual stream is multiplied by it after each block.
  bool layer_output_scale = false;
  // Final logit soft-capping c: logits -> c tanh(logits / c) (key final_logit_softcapping
  // overrides it); 0: none.
  float default_final_softcap = 0.0f;
  Gating default_gating = Gating::kSoftmax;  // without expert_gating_func in the file
  bool default_expert_weights_norm = true;   // without expert_weights_norm in the file
  // The pre-FFN norm's tensor ("ffn_norm"; gpt-oss: "post_attention_norm").
  const char* ffn_norm = "ffn_norm";
  float default_rms_eps = 1e-5f;
  float default_rope_base = 10000.0f;
  SynthDefaults synth;
};

// The row of general.architecture, or nullptr when herd does not know it.
const ArchSpec* find_arch(std::string_view name);
// Names of all known architectures, for help texts and errors.
std::vector<std::string_view> arch_names();

// Model hyper-parameters, as stored under "<arch>.*" in GGUF metadata.
struct HParams {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;     // dense FFN width (0: every layer MoE; the widest of n_ff_of)
  int64_t n_layer = 0;  // blocks the forward pass runs
  // NextN (multi-token prediction) blocks the converter appends after those (block_count =
  // n_layer + n_nextn): listed and checked, kept for speculative decoding, never run by the
  // plain forward pass.
  int64_t n_nextn = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;   // MLA: 1 (the latent is one KV head shared by every query head)
  int64_t head_dim = 0;    // key size per head (MLA: nope + rope)
  int64_t head_dim_v = 0;  // value size per head
  int64_t n_rot = 0;       // dimensions rope rotates (MLA: the rope part of a key)
  int64_t n_ctx = 0;       // training context length
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;

  // Rope scaling (rope.scaling.*).
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_factor = 1.0f;          // positions are divided by this (linear, YaRN)
  int64_t rope_original_ctx = 0;     // YaRN: the context the model was trained for
  float yarn_log_multiplier = 0.0f;  // DeepSeek's mscale coefficient (0.1 for V3)
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;

  int64_t sliding_window = 0;  // positions a local layer sees (0: none)

  // Multi-head latent attention (AttentionKind::kMla).
  int64_t q_lora_rank = 0;   // 0: queries through plain attn_q
  int64_t kv_lora_rank = 0;  // latent size
  bool mla_kv_b = false;     // attn_kv_b present (older files; decompresses the latent)
  bool mla_split_b = false;  // attn_k_b / attn_v_b present (absorbed form)
  bool mla_3d_b = false;     // attn_k_b / attn_v_b are 3-D per head (mainline's converter)

  // Mixture of experts.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_expert = 0;
  int64_t n_expert_shared = 0;  // shared experts (ffn_*_shexp) every token runs through
  int64_t n_leading_dense = 0;  // the first layers have a dense FFN (n_ff wide)
  Gating gating = Gating::kSoftmax;
  bool expert_weights_norm = true;  // the chosen experts' weights are divided by their sum
  float expert_weights_scale = 1.0f;
  int64_t n_expert_group = 1, n_expert_group_used = 1;  // grouped choice (DeepSeek V3: 8, 4)
  bool expert_selection_bias = false;  // exp_probs_b: added to the scores for choosing only

  bool tied_output = false;  // no output.weight: token_embd is also the output matrix

  // Per-layer shapes (ArchSpec::layer_shapes); empty vectors and zeros: every layer alike.
  std::vector<uint8_t> swa_layers;    // [n_layer] 1: a sliding-window layer
  int64_t head_dim_swa = 0;           // key (= value) size of the sliding layers
  int64_t n_rot_swa = 0;              // rope width of the sliding layers
  float rope_base_swa = 0.0f;         // rope base of the sliding layers (0: the row's)
  std::vector<int64_t> n_head_kv_of;  // [n_layer] KV heads of each layer
  std::vector<int64_t> n_ff_of;       // [n_layer] dense FFN width of each layer
  int64_t n_kv_shared = 0;            // the last layers read an earlier layer's cache
  int64_t n_embd_per_layer = 0;       // width of each layer's input (0: none)
  float final_softcap = 0.0f;         // logits -> c tanh(logits / c); 0: none
  // Gemma 4 26B / 31B (attention_k_eq_v): the global layers have no attn_v; their values
  // are the keys' projection (before the k norm and rope).
  bool global_v_is_k = false;
};

// What a weight is, so that type policies (the Q4_K_M mix) and loaders need not parse names.
enum class TensorRole {
  kEmbedding,
  kOutput,
  kNorm,
  kBias,
  kAttention,
  kAttentionValue,
  kFfn,
  kFfnDown,
  kRouter,
  kExperts,
  kExpertsDown
};

// Which weight of a block a tensor is: the member of the engine's layer it is loaded into
// (engine/shard_state.h, where each member is declared beside its weight). A model's tensor
// list names the member of every block tensor, so the loader visits the list rather than
// spelling it again.
enum class LayerWeight : uint8_t {
  kNone,  // outside the blocks (embedding, output head, rope factors)
  kAttnNorm,
  kFfnNorm,
  kPostAttnNorm,
  kPostFfnNorm,
  // Grouped-query attention.
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnQBias,
  kAttnKBias,
  kAttnVBias,
  kAttnQNorm,
  kAttnKNorm,
  kAttnSinks,
  // Multi-head latent attention (attn_q of a file without q_lora is kAttnQB).
  kAttnQA,
  kAttnQANorm,
  kAttnQB,
  kAttnKvA,
  kAttnKvANorm,
  kAttnKvB,  // older files: decompresses the latent to keys and values (per head)
  kAttnKB,   // per head
  kAttnVB,   // per head
  // Both.
  kAttnOutput,
  kAttnOutputBias,
  // The dense FFN of a dense layer, or the shared experts of an MoE layer.
  kFfnGate,
  kFfnUp,
  kFfnDown,
  // Mixture of experts.
  kRouter,
  kRouterBias,
  kSelectionBias,
  kGateExps,  // per expert
  kUpExps,
  kDownExps,
  kGateExpsBias,  // per expert: [rows, n_expert]
  kUpExpsBias,
  kDownExpsBias,
  // Gemma 4's experts beside the dense FFN (ArchSpec::moe_beside_dense).
  kRouterScale,    // ffn_gate_inp.scale [n_embd]
  kGateUpExps,     // [n_embd, 2 n_ff_expert, n_expert]: per expert gate rows, then up rows
  kDownExpsScale,  // ffn_down_exps.scale [n_expert], whole
  kPreFfnNorm2,
  kPostFfnNorm1,
  kPostFfnNorm2,
  // Gemma 4's per-layer inputs and output scale.
  kPerLayerGate,      // inp_gate [n_embd -> n_embd_per_layer]
  kPerLayerProj,      // proj [n_embd_per_layer -> n_embd]
  kPerLayerPostNorm,  // post_norm [n_embd]
  kLayerOutputScale,  // layer_output_scale [1]
};

// Which range of a tensor-parallel rank's slice (model/tensor_slice.h) cuts a weight.
enum class SplitBy { kNone, kHeads, kKvHeads, kFf, kVocab };

struct TensorSpec {
  std::string name;            // GGUF name, e.g. "blk.3.attn_q.weight"
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the contiguous dimension
  TensorRole role;
  int layer = -1;  // -1 for tensors outside the blocks
  // A rank's slice keeps elements of dimension split_dim (0: columns, 1: rows) in its
  // `split` range, `split_unit` elements per unit of the range (per head, per FFN row).
  // Expert tensors (kExperts, kExpertsDown) are also cut to the rank's experts along
  // dimension 2.
  SplitBy split = SplitBy::kNone;
  int split_dim = 0;
  int64_t split_unit = 1;
  // The last dimension counts experts (ffn_*_exps and their biases): a rank keeps its own.
  bool per_expert = false;
  LayerWeight weight = LayerWeight::kNone;  // the layer member it loads into
};

// The options of one block, from the row and the hyper-parameters.
struct LayerOptions {
  bool moe = false;      // mixture-of-experts FFN (else dense, n_ff wide)
  bool sliding = false;  // attends to the last hp.sliding_window positions only
  // Rope of this layer: base, and the scaling it uses (kNone on Gemma 3's local layers).
  float rope_base = 10000.0f;
  RopeScaling rope_scaling = RopeScaling::kNone;
  bool nextn = false;  // a NextN block (il >= hp.n_layer): listed, not run
  // Attention shapes (Gemma 4's sliding and global layers differ; else the model's).
  int64_t head_dim = 0, head_dim_v = 0, n_head_kv = 0, n_rot = 0;
  int64_t n_ff = 0;        // rows of a dense FFN here (feed_forward_length, per layer)
  bool rope_freqs = true;  // rope_freqs.weight divides this layer's angles
  bool has_v = true;       // attn_v present (else the values are the keys' projection)
  bool own_kv = true;      // computes and caches its keys and values
  int64_t kv_layer = 0;    // the layer whose cached keys and values it reads (own: il)
};
LayerOptions layer_options(const ArchSpec& arch, const HParams& hp, int64_t il);

// Every tensor a model of this architecture and shape has, in file order: what the loader
// binds, the tensor-parallel slicer cuts, the shipper sends, and the planner counts.
std::vector<TensorSpec> model_tensors(const ArchSpec& arch, const HParams& hp);

}  // namespace herd
