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
  // DeepSeek V4: one latent head used as both key and value (attn_kv), attending to a
  // sliding window of raw rows plus compressed entries (per-layer compress ratio; the
  // sparse ratio's layers choose theirs with a lightning indexer); grouped output projection
  // (attn_output_a per group, attn_output_b). engine/compressed_attention.h.
  kCompressed,
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
enum class Gating {
  kSoftmax,
  kSigmoid,
  kSqrtSoftplus,  // sqrt(softplus(logit)) (DeepSeek V4)
};

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
  // Attention shapes of the real models (0: herd's size rules, synth_hparams). head_dim: the
  // key size (MLA: nope + rope); rope_dim: MLA's rope part of a key; kv_lora_rank: MLA's
  // latent (the reference takes mainline's layout only with 512 and rope 64).
  int64_t head_dim = 0, head_dim_v = 0, rope_dim = 0, kv_lora_rank = 0;
  // Grouped-query attention with partial rotary embeddings: rope turns head_dim / rope_div
  // dimensions (GLM-4.5, MiniMax-M2: 2).
  int64_t rope_div = 1;
  // MLA as mainline's converter writes it (GLM-5): key_length_mla / value_length_mla, one KV
  // head, 3-D attn_k_b / attn_v_b and no attn_kv_b. Else the reference's converter's layout.
  bool mla_mainline = false;
  // The DSA indexer's heads, head size and top-k (GLM-5: 32, 128, 2048).
  int64_t n_indexer_head = 0, indexer_head_dim = 0, indexer_top_k = 0;
  // Attention window of the local layers: at most this, and at most n_ctx / window_ctx_div
  // (rows with sliding-window layers only).
  int64_t sliding_window = 0;
  int64_t window_ctx_div = 1;
  bool rope_sections = false;  // write rope.dimension_sections (Qwen3.5's M-RoPE)
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
  bool qkv_bias = false;     // attn_q/k/v carry biases (qwen2, gpt-oss)
  bool output_bias = false;  // attn_output carries a bias (gpt-oss)
  bool qk_norm = false;      // per-head RMSNorm of q and k before rope (qwen3, gemma3)
  // With qk_norm: the file decides (GLM-4.5 has attn_q_norm / attn_k_norm, GLM-4.5-Air not).
  bool qk_norm_optional = false;
  // With qk_norm: one RMSNorm over the whole q row and one over the whole k row (all heads
  // together; weights [n_head * head_dim], [n_head_kv * head_dim]), as MiniMax-M2. A tensor-
  // parallel rank adds its heads' sums of squares to the other ranks' (an all-reduce of two
  // floats per token) before it norms its own heads.
  bool qk_norm_whole_row = false;
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
  // Hyper-connections (DeepSeek V4's mHC, engine/hyper_connection.h): the residual is
  // hyper_connection.count streams of n_embd per token, mixed before and after each sublayer
  // by hc_attn_* / hc_ffn_* and reduced by output_hc_* before the output norm.
  bool hyper_connections = false;
  // kCompressed: layers whose compress ratio is this one are sparse (overlapping blocks and a
  // lightning indexer, CSA); other compressed layers use every entry (HCA).
  int64_t sparse_compress_ratio = 0;
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
  // A file without expert_weights_scale is refused, as the reference refuses it (GLM: its
  // 2.5 moves the logits by a third; a default of 1 would be silently wrong).
  bool expert_weights_scale_required = false;
  // DeepSeek sparse attention's indexer (GLM-5): its tensors (indexer.*) are listed, checked
  // and kept, not run: the reference runs dense attention by default, and with top_k at
  // least the context the indexer would choose every key anyway.
  bool dsa_indexer = false;
  // The pre-FFN norm's tensor ("ffn_norm"; gpt-oss: "post_attention_norm").
  const char* ffn_norm = "ffn_norm";
  // Hybrid stacks of Gated DeltaNet (linear attention, a recurrent state per sequence) and
  // full-attention layers (Qwen3-Next, Qwen3.5 / 3.6): layer il is full attention iff
  // (il + 1) % interval == 0, interval = full_attention_interval when set here (Qwen3-Next's
  // reference hard-codes 4 and ignores the file), else the file's full_attention_interval.
  bool delta_net = false;
  int full_attention_interval = 0;
  // V head j of a DeltaNet layer reads K head j % n_k (tiled: Qwen3.5, whose converter
  // reorders the V heads) or j / (n_v / n_k) (grouped: Qwen3-Next).
  bool delta_v_tiled = false;
  // beta and alpha come from one ssm_ba (rows grouped per K head: [b of its V heads | a of
  // them], Qwen3-Next) instead of ssm_beta and ssm_alpha.
  bool delta_ba_fused = false;
  // Gated attention: attn_q's rows are per head [q | gate], and each head's attention output
  // is multiplied by sigmoid(gate) before attn_output (Qwen3-Next, Qwen3.5).
  bool attn_output_gate = false;
  // The shared expert's output is multiplied by sigmoid(ffn_gate_inp_shexp . h) per token.
  bool shared_expert_gate = false;
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
  // The MTP head's view of the model (mtp_model_info, model_info.h): the last n_nextn_run of
  // the n_layer blocks are NextN blocks, run as ordinary layers by the head's own shard.
  int64_t n_nextn_run = 0;
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
  // DeepSeek sparse attention's indexer (ArchSpec::dsa_indexer; DeepSeek V4's lightning
  // indexer on its sparse compressed layers): heads, head size, top-k.
  int64_t n_indexer_head = 0, indexer_head_dim = 0, indexer_top_k = 0;

  // The row's q/k norm (ArchSpec::qk_norm_optional) is not in this file (GLM-4.5-Air).
  bool qk_norm_absent = false;

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

  // Rows of the shared experts (expert_shared_feed_forward_length); 0: n_ff_expert each.
  int64_t n_ff_shared = 0;

  // Gated DeltaNet layers (ArchSpec::delta_net; ssm.* keys).
  int64_t full_attention_interval = 0;
  int64_t delta_conv_kernel = 0;  // ssm.conv_kernel
  int64_t delta_n_k_heads = 0;    // ssm.group_count
  int64_t delta_n_v_heads = 0;    // ssm.time_step_rank
  int64_t delta_head_k = 0;       // ssm.state_size
  int64_t delta_head_v = 0;       // ssm.inner_size / ssm.time_step_rank
  // Clamped SwiGLU (DeepSeek V4): min(silu(g), L) * clamp(u, -L, L) with L = swiglu_limit
  // for routed experts and swiglu_limit_shared for shared ones; 0: plain SwiGLU.
  float swiglu_limit = 0.0f, swiglu_limit_shared = 0.0f;
  int64_t n_hash_layers = 0;  // the first layers route by token id (ffn_gate_tid2eid)

  // Hyper-connections (ArchSpec::hyper_connections).
  int64_t n_hc = 1;  // residual streams per token
  int64_t hc_sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  int64_t n_hc_mixes() const { return 2 * n_hc + n_hc * n_hc; }
  int64_t hidden_width() const { return n_hc * n_embd; }  // floats per token between layers

  // Compressed attention (AttentionKind::kCompressed).
  std::vector<int64_t> compress_ratios;      // [n_layer]: 0 window only, else positions per entry
  float compress_rope_base = 0.0f;           // rope base of the compressed layers (with scaling)
  int64_t n_out_group = 0, o_lora_rank = 0;  // attn_output_a's groups and rows per group
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
  kSharedExpertGate,  // ffn_gate_inp_shexp: [n_embd]
  // Gated DeltaNet (linear attention).
  kDeltaQkv,    // attn_qkv: [conv_dim x n_embd], rows [q | k | v]
  kDeltaZ,      // attn_gate: [n_v * dv x n_embd]
  kDeltaBeta,   // ssm_beta: [n_v x n_embd]
  kDeltaAlpha,  // ssm_alpha: [n_v x n_embd]
  kDeltaBa,     // ssm_ba: [2 n_v x n_embd], grouped per K head
  kDeltaConv,   // ssm_conv1d: [conv_dim][conv_kernel]
  kDeltaDtBias,
  kDeltaA,
  kDeltaNorm,  // ssm_norm: [dv]
  kDeltaOut,   // ssm_out: [n_embd x n_v * dv]
  // DeepSeek V4: hyper-connections, the latent head, grouped output, compressors, indexer.
  kHcAttnFn,
  kHcAttnScale,
  kHcAttnBase,
  kHcFfnFn,
  kHcFfnScale,
  kHcFfnBase,
  kAttnKv,
  kAttnOutputA,  // per output group
  kAttnOutputB,
  kCompKv,
  kCompGate,
  kCompApe,
  kCompNorm,
  kIndexerQB,
  kIndexerProj,
  kIndexerCompKv,
  kIndexerCompGate,
  kIndexerCompApe,
  kIndexerCompNorm,
  kHashExperts,  // ffn_gate_tid2eid: int32 [n_used, n_vocab]
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
  // kCompressed: positions per compressed entry (0: the window only), and whether the
  // entries are chosen by the lightning indexer (sparse, CSA).
  int64_t compress_ratio = 0;
  bool compress_indexed = false;
  bool hash_routed = false;  // the experts come from ffn_gate_tid2eid[token]
  bool nextn = false;        // a NextN block (il >= hp.n_layer): listed, not run
  bool nextn_run = false;    // a NextN block the MTP head runs (hp.n_nextn_run): full attention
  bool linear = false;       // a Gated DeltaNet layer: no attention, a recurrent state per sequence
  // Attention shapes (Gemma 4's sliding and global layers differ; else the model's).
  int64_t head_dim = 0, head_dim_v = 0, n_head_kv = 0, n_rot = 0;
  int64_t n_ff = 0;        // rows of a dense FFN here (feed_forward_length, per layer)
  bool rope_freqs = true;  // rope_freqs.weight divides this layer's angles
  bool has_v = true;       // attn_v present (else the values are the keys' projection)
  bool own_kv = true;      // computes and caches its keys and values
  int64_t kv_layer = 0;    // the layer whose cached keys and values it reads (own: il)
};
LayerOptions layer_options(const ArchSpec& arch, const HParams& hp, int64_t il);

// Whether a sequence's cached state can be cut back to any of its prefixes and continued: a
// KV cache of positions can; a recurrent state (Gated DeltaNet) and compressed attention's
// window and compressor rings, which later positions overwrite, continue only from their end,
// a snapshot, or position 0.
bool state_cuts_back(const ArchSpec& arch);

// The other spelling of a tensor's name that converters also write (DeepSeek V4:
// output_hc_* / hc_head_*, attn_compressor_* / attn_compress_*, indexer_compressor_* /
// indexer.compress_*), or "" when it has none. A file may use either; herd's list uses the
// first.
std::string tensor_alias(std::string_view name);

// Every tensor a model of this architecture and shape has, in file order: what the loader
// binds, the tensor-parallel slicer cuts, the shipper sends, and the planner counts.
std::vector<TensorSpec> model_tensors(const ArchSpec& arch, const HParams& hp);

}  // namespace herd
