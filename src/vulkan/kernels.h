// The operations of a forward pass as Vulkan dispatches: each records into a Recorder, on
// buffers already on the device. The shader variant of each is chosen once, from the
// device's features (subgroup reductions where offered, shared memory where not); its
// pipeline is made on first use and kept.
// Shapes are in the comments; every buffer holds row-major floats unless said otherwise.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "quant/types.h"
#include "vulkan/buffer.h"
#include "vulkan/recorder.h"

namespace herd::vulkan {

struct KernelOptions {
  // false: the shared-memory reductions even where the device offers subgroup arithmetic
  // (tests run both variants on one device).
  bool subgroups = true;
  // Kernels::matmul calls matvec below this many tokens, where matvec is as fast
  // (lavapipe: docs/backends.md); 1: always the tiled shader (tests).
  int64_t matmul_min_tokens = 8;
};

// The gated products of the FFN, as engine/ops.h names them.
enum class GatedActivation { kSiluMul, kGeluTanhMul, kSwigluOaiMul, kSiluClampMul };

struct RopeShape {
  int64_t n_tokens = 1;
  int64_t n_head = 1;
  int64_t head_dim = 0;
  int64_t n_rot = 0;       // rotated dimensions of each head (even)
  int64_t rot_offset = 0;  // the first rotated dimension (0, or head_dim - n_rot)
  bool neox = false;       // RopeStyle::kNeoxHalves; false: kAdjacentPairs
};

// Attention over the F16 KV cache: one token (decode) or a prefill chunk's tokens, token t
// at position pos0 + t seeing positions [max(0, pos - window + 1), pos]. Head h reads KV head
// h / (n_head / n_kv_head); row j of KV head g starts at element j * stride + g * head_stride
// of the keys (and of the values: MLA binds the keys' buffer as values, v_dim <= k_dim).
struct AttentionShape {
  int64_t n_head = 1;
  int64_t n_kv_head = 1;
  int64_t n_pos = 0;  // positions in the cache; a token's scores row is this long
  int64_t k_dim = 0;
  int64_t v_dim = 0;
  int64_t stride = 0;       // f16 elements from one position's row to the next
  int64_t head_stride = 0;  // f16 elements from one KV head's row to the next
  float scale = 1.0f;       // on q . k
  int64_t n_tokens = 1;
  int64_t pos0 = -1;   // the position of token 0; -1: n_pos - n_tokens (the chunk is the end)
  int64_t window = 0;  // sliding window (0: none)
  // Elements before this call's rows: token 0's queries and output, and position 0 of the
  // keys and values (a sequence's slot in a cache of several; even).
  int64_t q_offset = 0, kv_offset = 0, out_offset = 0;
};

// The expert products of an MoE layer (Kernels::matvec_experts).
struct ExpertShape {
  int64_t n_expert = 0;  // matrices in the weights
  int64_t rows = 0, cols = 0;
  int64_t n_tokens = 1;
  int64_t n_used = 1;       // experts per token
  bool x_per_slot = false;  // x is [n_tokens][n_used][cols] (ffn_down) not [n_tokens][cols]
};

// The MoE router's options, as engine/router.h's RouterOptions (gating as model/arch.h's).
struct RouterShape {
  enum Gating { kSoftmax, kSigmoid, kSqrtSoftplus } gating = kSoftmax;
  int64_t n_tokens = 1;
  int64_t n_expert = 0;
  int64_t n_used = 0;
  bool norm_weights = true;
  float weights_scale = 1.0f;
  int64_t n_group = 1, n_group_used = 1;
};

// One run of consecutive tokens of one sequence through a Gated DeltaNet layer's mixing
// (engine/delta_net.h): rows [t0, t0 + n_tokens) of the batch, the slot's state at
// state_offset floats of the layer's state buffer ([conv_rows][conv_dim], then [n_v][dk][dv]:
// engine/kv_cache.h's RecurrentShape). fresh: the sequence starts here (its state read as
// zeros).
struct DeltaNetShape {
  int64_t n_tokens = 1, t0 = 0;
  int64_t n_k = 1, n_v = 1, dk = 0, dv = 0;
  int64_t conv_kernel = 1;
  bool tiled = false;  // V head j reads K head j % n_k (else j / (n_v / n_k))
  // beta's and alpha's projections: token t's head j at t * stride + offset + j.
  int64_t b_stride = 0, b_offset = 0, alpha_stride = 0, alpha_offset = 0;
  int64_t state_offset = 0;
  bool fresh = false;
  float eps = 1e-6f;  // of the L2 norms of q and k, and of the output's RMSNorm
  int64_t conv_dim() const { return 2 * n_k * dk + n_v * dv; }
  int64_t conv_floats() const { return (conv_kernel - 1) * conv_dim(); }
};

// DeepSeek V4 (Kernels::hc_pre ... hash_route; engine/hyper_connection.h, compressor.h,
// lightning_indexer.h, compressed_attention.h). A sequence's rows (raw latents, compressor
// rows) lie at seq * n_ctx + pos, its entries at seq * n_entries + block. `tokens`:
// [n_tokens][4] uint32: the token's sequence, position and id, and 0.
struct HyperShape {
  int64_t n_tokens = 1;
  int64_t n_hc = 4;  // streams
  int64_t n_embd = 0;
  int64_t sinkhorn_iters = 20;
  float eps = 1e-6f;
  bool head = false;  // the output head's collapse (pre only)
};

// A compressor of a layer (engine/compressor.h's CompressorShape and compressed_finish).
struct CompressShape {
  int64_t ratio = 0;
  int64_t head_dim = 0;
  bool overlap = false;  // CSA: rows [2 head_dim], an entry also reads the previous block
  int64_t n_ctx = 0;     // rows per sequence
  int64_t n_entries = 0;
  int64_t n_rot = 0;      // the entries' roped tail
  bool hadamard = false;  // the indexer's keys
  float eps = 1e-6f;
  int64_t width() const { return overlap ? 2 * head_dim : head_dim; }
};

struct IndexerShape {
  int64_t n_tokens = 1;
  int64_t n_head = 0, dim = 0;
  int64_t n_entries = 0, ratio = 0, top_k = 0;
  float w_scale = 1.0f;  // on the head weights
};

struct CompressedAttentionShape {
  int64_t n_tokens = 1;
  int64_t n_head = 0, dim = 0;
  int64_t n_ctx = 0, window = 0;
  int64_t ratio = 0;  // 0: the window only
  bool indexed = false;
  int64_t top_k = 0, n_entries = 0;
  float scale = 1.0f;
  // Keys a token may read: its window and the entries it may choose from.
  int64_t key_rows() const {
    return window + (ratio == 0 ? 0 : indexed ? std::min(top_k, n_entries) : n_entries);
  }
};

class Kernels {
 public:
  explicit Kernels(Context& context, KernelOptions options = {});
  ~Kernels();
  Kernels(const Kernels&) = delete;
  Kernels& operator=(const Kernels&) = delete;

  bool uses_subgroups() const { return subgroups_; }
  // Whether matvec has a shader for this weight type.
  static bool has_matvec(TensorType type);

  // out[t][c] = sum_j weights[t][j] * y[t][j][c]: an MoE layer's experts summed with the
  // router's weights. y: [n_tokens][n_used][n]; weights: [n_tokens][n_used]; out: [n_tokens][n].
  void moe_combine(Recorder& r, Binding y, Binding weights, Binding out, int64_t n, int64_t n_used,
                   int64_t n_tokens);
  // out[t] = W[ids[t]] as floats (the token embedding's gather). w: rows of `type` in GGUF's
  // layout; ids: [n_tokens] int32 row ids; out: [n_tokens][cols].
  void get_rows(Recorder& r, TensorType type, Binding w, Binding ids, Binding out, int64_t cols,
                int64_t n_tokens);
  // The experts' products: y[t][j] = W[ids[t][j]] x[t] (x_per_slot: x[t][j]) for j < n_used.
  // w: [n_expert][rows] rows of `type`; ids: [n_tokens][n_used] int32 (Kernels::route's);
  // y: [n_tokens][n_used][rows]. Each expert's bytes are read where its id says.
  void matvec_experts(Recorder& r, TensorType type, Binding w, Binding x, Binding ids, Binding y,
                      const ExpertShape& shape);
  // y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens. w: [rows] rows of `type` in GGUF's
  // layout (row_bytes(type, cols) each); x: [n_tokens][cols]; y: [n_tokens][rows]. Made for
  // one token (decode) or a few (batched decode): each token passes over the weights again
  // (matmul, for more).
  // Throws herd::Error("[vulkan] ...") for a type without a shader.
  void matvec(Recorder& r, TensorType type, Binding w, Binding x, Binding y, int64_t rows,
              int64_t cols, int64_t n_tokens = 1);
  // The same product as matvec (its contract and shapes), for prefill and batched decode:
  // tiles of 64 rows x 8 to 32 tokens, each weight dequantized once per tile of tokens
  // instead of once per token. Fewer than KernelOptions::matmul_min_tokens tokens go to
  // matvec.
  void matmul(Recorder& r, TensorType type, Binding w, Binding x, Binding y, int64_t rows,
              int64_t cols, int64_t n_tokens);
  // matvec_experts's product (its contract and shapes) in matmul's tiles: each expert's
  // slots gathered into tiles of tokens. Where the experts get fewer than
  // matmul_min_tokens slots on average, matvec_experts.
  void matmul_experts(Recorder& r, TensorType type, Binding w, Binding x, Binding ids, Binding y,
                      const ExpertShape& shape);
  // out[i][j] = x[i][j] / rms(x[i]) * weight[j]. x, out: [n_rows][n]; weight: [n].
  void rms_norm(Recorder& r, Binding x, Binding weight, Binding out, int64_t n, int64_t n_rows,
                float eps);
  // x[i] = softmax(x[i]) for each row. x: [n_rows][n].
  void softmax(Recorder& r, Binding x, int64_t n, int64_t n_rows);
  // out[i] = silu(gate[i]) * up[i]. gate, up, out: [n]; out may be gate.
  void silu_mul(Recorder& r, Binding gate, Binding up, Binding out, int64_t n) {
    gated(r, GatedActivation::kSiluMul, gate, up, out, n);
  }
  // out[i] = act(gate[i]) * up[i] (engine/ops.h: silu_mul, gelu_tanh_mul, swiglu_oai_mul,
  // silu_clamp_mul, the last with `limit`). gate, up, out: [n]; out may be gate.
  void gated(Recorder& r, GatedActivation kind, Binding gate, Binding up, Binding out, int64_t n,
             float limit = 0.0f);
  // out[i] = a[i] + b[i]. a, b, out: [n].
  void add(Recorder& r, Binding a, Binding b, Binding out, int64_t n);
  // x[i] *= s. x: [n].
  void scale(Recorder& r, Binding x, float s, int64_t n);
  // Rotates x [n_tokens][n_head][head_dim] in place by angles [n_tokens][n_rot]: per token
  // the n_rot / 2 cosines, then the n_rot / 2 sines of engine::rope_angles().
  void rope(Recorder& r, Binding x, Binding angles, const RopeShape& shape);
  // The experts of each token and their weights (engine/router.h's route): logits:
  // [n_tokens][n_expert]; bias: [n_expert] selection bias or null; experts: [n_tokens][n_used]
  // int32 ids, best first; weights: [n_tokens][n_used].
  // REQUIRES: n_expert <= 512, n_used <= 64, n_group <= 64 and divides n_expert.
  void route(Recorder& r, Binding logits, const Binding* bias, Binding experts, Binding weights,
             const RouterShape& shape);
  // dst[rows[t] + i] = f16(src[t][i]) for i < n, t < n_tokens: a batch's keys or values
  // into the F16 cache, each token's row where its slot and position are. src:
  // [n_tokens][n] floats; rows: [n_tokens] uint32 element offsets; dst: f16.
  // REQUIRES: n and every rows[t] even.
  void store_rows(Recorder& r, Binding src, Binding rows, Binding dst, int64_t n, int64_t n_tokens);
  // x[i][j] += bias[j] for i < n_rows: a projection's bias over the batch. x: [n_rows][n].
  void add_bias(Recorder& r, Binding x, Binding bias, int64_t n, int64_t n_rows);
  // x[i][j] += bias[ids[i]][j]: each expert's bias on the slots it serves. x: [n_rows][n];
  // bias: [n_expert][n]; ids: [n_rows] int32 (Kernels::route's experts).
  void add_expert_bias(Recorder& r, Binding x, Binding bias, Binding ids, int64_t n,
                       int64_t n_rows);
  // dst[r][dst_offset + c] = src[r][src_offset + c] for r < n_rows, c < width, rows of
  // src_stride and dst_stride floats: part of each row to or from a dense block.
  void copy_rows(Recorder& r, Binding src, Binding dst, int64_t n_rows, int64_t width,
                 int64_t src_stride, int64_t src_offset, int64_t dst_stride, int64_t dst_offset);
  // ids[i] = local[ids[i]] for i < n: the router's expert ids as indices into a rank's own
  // experts, 0xffffffff for one it does not hold (matvec_experts writes 0 for that slot and
  // add_expert_bias skips it). ids: [n] uint32; local: [n_expert] uint32.
  void remap_experts(Recorder& r, Binding ids, Binding local, int64_t n);
  // dst[offset + i] = f16(src[i]) for i < n: a token's keys or values into the F16 cache.
  // src: [n] floats; dst: f16. REQUIRES: n and offset even.
  void store_f16(Recorder& r, Binding src, Binding dst, int64_t n, int64_t offset);
  // out[h] = sum_j softmax_j(q[h] . k_j * scale) v_j (kernels/attention.h's attend), with
  // sinks[h] as an extra logit without a value when `sinks` is given. q:
  // [n_tokens][n_head][k_dim]; keys, values: f16 (AttentionShape); scores:
  // [n_tokens][n_head][n_pos] scratch; out: [n_tokens][n_head][v_dim].
  // REQUIRES: k_dim, stride, head_stride even; k_dim <= 1024; n_kv_head divides n_head.
  void attend(Recorder& r, Binding q, Binding keys, Binding values, const Binding* sinks,
              Binding scores, Binding out, const AttentionShape& shape);
  // x[i] *= sigmoid(gate[i / group]) for i < n: gates per element (group 1) or per row of
  // `group` elements. x: [n]; gate: [n / group].
  void sigmoid_mul(Recorder& r, Binding x, Binding gate, int64_t n, int64_t group);
  // Gated DeltaNet (kernels_delta.cpp), for one run (DeltaNetShape). delta_conv: the causal
  // conv with SiLU (kernels/delta_net.h conv1d_silu) of x [n][conv_dim] into out, weight
  // [kernel][conv_dim]; the state's conv rows read and updated. delta_rule: the gated delta
  // rule of every V head (engine/delta_net.cpp's from the conv output on: q, k L2-normed,
  // the gates, the recurrence, the RMSNorm by norm [dv] and silu(z)) from conv [n][conv_dim]
  // into out [n][n_v dv]; b, alpha: the projections (DeltaNetShape's strides); z: [n][n_v
  // dv]; dt_bias, a: [n_v]; the state's delta rows read and updated.
  // REQUIRES: conv_kernel <= 16; dk, dv <= 256.
  void delta_conv(Recorder& r, Binding x, Binding weight, Binding state, Binding out,
                  const DeltaNetShape& shape);
  void delta_rule(Recorder& r, Binding conv, Binding b, Binding alpha, Binding z, Binding dt_bias,
                  Binding a, Binding norm, Binding state, Binding out, const DeltaNetShape& shape);

  // ---- DeepSeek V4 (kernels_ds4.cpp)
  // Before a sublayer: each token's weights from its mixes (hc_weights; the head's:
  // hc_head_weights), kept in coeffs, and out = sum_i pre_i x_i. x: [n_tokens][n_hc][n_embd];
  // mixes, coeffs: [n_tokens][2 n_hc + n_hc^2] ([n_tokens][n_hc] and unused for the head);
  // scale: [3] ([1]); base: [n_mixes]; out: [n_tokens][n_embd]. REQUIRES: n_hc <= 8.
  void hc_pre(Recorder& r, Binding x, Binding mixes, Binding scale, Binding base, Binding coeffs,
              Binding out, const HyperShape& shape);
  // After it, in place: x_i = post_i f + sum_j C[j][i] x_j (hc_expand). f: [n_tokens][n_embd].
  void hc_post(Recorder& r, Binding f, Binding coeffs, Binding x, const HyperShape& shape);
  // x[i] = H x[i] / sqrt(n) for each row. x: [n_rows][n]; n a power of two <= 1024.
  void hadamard(Recorder& r, Binding x, int64_t n, int64_t n_rows);
  // A batch's compressor rows into its sequences' row stores, the ape of the position added to
  // the score. kv, score: [n_tokens][width]; ape: [ratio][width]; kv_rows, score_rows:
  // [n_seq * n_ctx][width].
  void compressor_rows(Recorder& r, Binding kv, Binding score, Binding ape, Binding tokens,
                       Binding kv_rows, Binding score_rows, const CompressShape& shape,
                       int64_t n_tokens);
  // The entries of n_blocks complete blocks (compress_block, then compressed_finish) into
  // entries (F16 [n_seq][n_entries][head_dim]). blocks: [n_blocks][2] uint32 seq, block;
  // norm: [head_dim]; angles: [n_blocks][n_rot] of each block's first position.
  // REQUIRES: head_dim even and <= 1024 (a power of two with hadamard).
  void compress(Recorder& r, Binding kv_rows, Binding score_rows, Binding blocks, Binding norm,
                Binding angles, Binding entries, const CompressShape& shape, int64_t n_blocks);
  // The lightning indexer's top_k entries of each token (indexer_scores, top_k). q:
  // [n_tokens][n_head][dim] roped and transformed; w: [n_tokens][n_head] (times w_scale);
  // keys: F16 [n_seq][n_entries][dim]; scores: [n_tokens][n_entries] scratch; chosen:
  // [n_tokens][top_k] uint32, the first min(visible, top_k) written.
  void indexer_top_k(Recorder& r, Binding q, Binding w, Binding keys, Binding tokens,
                     Binding scores, Binding chosen, const IndexerShape& shape);
  // Attention of each token over its window of raw rows (F16 [n_seq][n_ctx][dim]) and its
  // entries (chosen, or every visible one), keys as values, with a sink per head. q, out:
  // [n_tokens][n_head][dim]; scores: [n_tokens][n_head][key_rows()] scratch.
  // REQUIRES: dim even and <= 1024.
  void attend_compressed(Recorder& r, Binding q, Binding raw, Binding entries, Binding chosen,
                         Binding sinks, Binding tokens, Binding scores, Binding out,
                         const CompressedAttentionShape& shape);
  // A hash-routed layer's experts (a row of table [n_vocab][n_used] int32 by token id) and
  // their weights from the router logits, as route's. REQUIRES: n_used <= 64.
  void hash_route(Recorder& r, Binding logits, Binding table, Binding tokens, Binding experts,
                  Binding weights, const RouterShape& shape);

 private:
  struct MatvecCall {
    TensorType type;
    int64_t rows, cols, n_tokens;
    int64_t n_used = 1, n_expert = 0;
    bool x_per_slot = false;
    // The experts' products of `shape` as one call.
    static MatvecCall experts(TensorType type, const ExpertShape& shape) {
      return {type,         shape.rows,     shape.cols,      shape.n_tokens,
              shape.n_used, shape.n_expert, shape.x_per_slot};
    }
  };
  void record_matvec(Recorder& r, const MatvecCall& call, Binding w, Binding x, Binding y,
                     const Binding* ids);
  void record_matmul(Recorder& r, const MatvecCall& call, Binding w, Binding x, Binding y,
                     const Binding* ids);
  const Pipeline& pipeline(const std::string& shader, uint32_t n_buffers, uint32_t push_bytes,
                           std::vector<uint32_t> spec_constants);
  // The grid types' codebook (iq1_s ... iq3_s) as the shaders' last binding; nullptr for
  // the other types, whose shaders have no such binding.
  const Binding* grid_binding(TensorType type) const;

  Context& context_;
  bool subgroups_ = false;
  int64_t matmul_min_tokens_ = 8;
  uint32_t reduce_size_ = 0;       // invocations of a workgroup that reduces (power of two)
  uint32_t elementwise_size_ = 0;  // invocations of an element-wise workgroup
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
  // The codebooks of quant/iq_grids.h, uploaded once: small (34 KiB), so every Kernels has
  // them, and a dispatch binds its type's part.
  std::unique_ptr<Buffer> grids_;
  std::map<TensorType, Binding> grid_bindings_;
};

}  // namespace herd::vulkan
