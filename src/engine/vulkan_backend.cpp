// Loading a shard onto a Vulkan device: every weight its layers read, uploaded once in its
// GGUF layout (the shaders decode each type); the norms and biases as the host Layer holds
// them (floats); an F16 KV cache per layer. The forward pass is vulkan_forward.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/vulkan_backend.h"
#include "util/error.h"
#include "vulkan/context.h"

namespace herd::engine {
namespace {

bool same_rope(const Rope& a, const Rope& b) {
  return a.n_rot == b.n_rot && a.base == b.base && a.freq_scale == b.freq_scale &&
         a.yarn == b.yarn && a.corr_low == b.corr_low && a.corr_high == b.corr_high &&
         a.magnitude == b.magnitude && a.freq_factors == b.freq_factors;
}

std::string mib(size_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

}  // namespace

std::shared_ptr<VulkanRuntime> vulkan_runtime(int index) {
  static std::mutex mutex;
  static std::map<int, std::weak_ptr<VulkanRuntime>> runtimes;
  std::lock_guard<std::mutex> lock(mutex);
  if (std::shared_ptr<VulkanRuntime> open = runtimes[index].lock()) return open;
  auto runtime = std::make_shared<VulkanRuntime>();
  runtime->context = vulkan::Context::create(index);
  runtime->kernels = std::make_unique<vulkan::Kernels>(*runtime->context);
  runtimes[index] = runtime;
  return runtime;
}

std::unique_ptr<DeviceBackend> make_vulkan_backend(const Shard::State& s, const gguf::File& file,
                                                   const ModelInfo& info, int index,
                                                   const UploadProgress& progress) {
  return std::make_unique<VulkanBackend>(s, file, info, index, progress);
}

vulkan::Buffer VulkanBackend::make_buffer(size_t bytes, const std::string& what,
                                          vulkan::BufferKind kind) {
  vulkan::Buffer b(*context_, std::max<size_t>(bytes, 4), kind, what);
  device_bytes_ += bytes;
  return b;
}

VulkanBackend::VulkanBackend(const Shard::State& s, const gguf::File& file, const ModelInfo& info,
                             int index, const UploadProgress& progress)
    : s_(s) {
  const ArchSpec& arch = *s.arch;
  const HParams& hp = s.hp;
  if (std::string missing = vulkan_unsupported(arch, hp, s.sliced); !missing.empty()) {
    throw Error("engine", std::string(arch.name) + " on a Vulkan device: " + missing +
                              " not yet on the Vulkan backend (run it with --device cpu)");
  }
  // The attention shader maps head h to KV head h / (n_head / n_kv): a slice's heads must be
  // whole groups of the KV heads it holds.
  const TensorSlice& slice = s.spec.slice;
  for (int64_t h = 0; h < s.n_head; ++h) {
    const int64_t group = hp.n_head / hp.n_head_kv;
    if (s.n_head % std::max<int64_t>(1, s.n_head_kv) != 0 ||
        (slice.head_begin + h) / group - slice.kv_head_begin != h / (s.n_head / s.n_head_kv)) {
      throw Error("engine",
                  "a tensor-parallel slice that cuts a group of query heads sharing a "
                  "KV head is not yet on the Vulkan backend (heads " +
                      std::to_string(slice.head_begin) + ".." + std::to_string(slice.head_end) +
                      ")");
    }
  }
  runtime_ = vulkan_runtime(index);
  context_ = runtime_->context.get();
  kernels_ = runtime_->kernels.get();
  recorder_ = std::make_unique<vulkan::Recorder>(*context_);
  // Uploads submit on the shared queue.
  std::lock_guard<std::mutex> lock(runtime_->mutex);
  n_embd_ = hp.n_embd;
  q_dim_ = s.n_head * hp.head_dim;
  // MLA caches one row per token: the normed latent and its roped key [kv_lora + n_rot].
  mla_ = arch.attention == AttentionKind::kMla;
  kv_dim_ = mla_ ? hp.kv_lora_rank + hp.n_rot : s.n_head_kv * hp.head_dim;

  // The matrices as the shard holds them (its slice's rows, columns and experts; views of
  // the file, or column cuts copied out of it), and the bytes to upload.
  auto bytes_of = [](const PackedMatrix& m) {
    return row_bytes(m.type(), m.cols()) * size_t(m.rows());
  };
  size_t total = 0, done = 0;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const Layer& l = s.layers[i];
    for (const TensorSpec& t : info.tensors) {
      if (t.layer != s.spec.layer_begin + int64_t(i)) continue;
      const LayerMember member = layer_member(t.weight);
      if (member.matrix != nullptr) total += bytes_of(l.*member.matrix);
      if (member.matrices != nullptr) {
        for (const PackedMatrix& m : l.*member.matrices) total += bytes_of(m);
      }
    }
  }
  if (s.spec.output && s.n_vocab > 0) total += bytes_of(s.output);
  if (s.per_layer_embd != nullptr) total += bytes_of(s.per_layer_model_proj);
  auto report = [&](size_t bytes) {
    done += bytes;
    if (progress) progress(done, total);
  };
  // One matrix, or a stack of equal matrices (the experts the shard holds, in its order).
  auto upload_matrices = [&](const std::vector<const PackedMatrix*>& ms, const std::string& what) {
    const PackedMatrix& first = *ms.front();
    if (!vulkan::Kernels::has_matvec(first.type())) {
      throw Error("engine", "tensor '" + what + "' is " +
                                std::string(type_traits(first.type()).name) +
                                ", which the Vulkan backend has no shader for yet");
    }
    DeviceMatrix m;
    m.type = first.type();
    m.rows = first.rows();
    m.cols = first.cols();
    m.n_expert = ms.size() > 1 ? int64_t(ms.size()) : 0;
    const size_t each = bytes_of(first);
    m.buffer = make_buffer(each * ms.size(), what);
    for (size_t i = 0; i < ms.size(); ++i) {
      const kernels::MatrixView v = ms[i]->gguf_view();
      HERD_CHECK(v.data != nullptr && v.rows == m.rows && v.cols == m.cols);
      vulkan::upload(*context_, m.buffer, v.data, each, i * each);
      report(each);
    }
    return m;
  };

  layers_.resize(s.layers.size());
  for (size_t i = 0; i < s.layers.size(); ++i) {
    DeviceLayer& l = layers_[i];
    l.host = &s.layers[i];
    const LayerOptions& lo = l.host->options;
    max_ff_ = std::max(max_ff_, lo.moe ? hp.n_expert_used * s.n_ff : 0);
    max_ff_ = std::max(max_ff_, l.host->n_ff);
    // The rope group: the first layer with the same rope.
    l.rope_group = -1;
    for (size_t g = 0; g < ropes_.size(); ++g) {
      if (same_rope(*ropes_[g], l.host->rope)) l.rope_group = int(g);
    }
    if (l.rope_group < 0) {
      l.rope_group = int(ropes_.size());
      ropes_.push_back(&l.host->rope);
    }
    max_rot_ = std::max(max_rot_, l.host->rope.n_rot);
    // The KV cache: keys and values of every slot's positions, rounded to f16 (Gemma 4:
    // of the layer's width; none where the layer reads an earlier one's).
    l.kv_dim = arch.layer_shapes ? lo.n_head_kv * lo.head_dim : kv_dim_;
    l.kv_layer = size_t(lo.kv_layer - s.spec.layer_begin);
    if (lo.linear) {  // its recurrent states, every slot's (zeros: no sequence yet)
      const std::vector<float> zeros(size_t(s.kv.n_seq() * s.delta_dims.state_shape().floats()));
      l.states = make_buffer(zeros.size() * 4, "recurrent states of layer " + std::to_string(i));
      vulkan::upload(*context_, l.states, zeros.data(), zeros.size() * 4);
      continue;
    }
    if (!lo.own_kv) continue;
    const size_t cache_bytes = size_t(s.kv.n_seq() * s.kv.n_ctx() * l.kv_dim) * 2;
    l.k_cache = make_buffer(cache_bytes, "keys of layer " + std::to_string(i));
    // Compressed attention's keys are its values (vulkan_ds4.cpp).
    if (arch.attention != AttentionKind::kCompressed) {
      l.v_cache = make_buffer(cache_bytes, "values of layer " + std::to_string(i));
    }
  }
  if (arch.layer_shapes) prepare_layer_shapes();
  for (size_t i = 0; i < layers_.size(); ++i) {
    DeviceLayer& l = layers_[i];
    const int64_t il = s.spec.layer_begin + int64_t(i);
    for (const TensorSpec& t : info.tensors) {
      if (t.layer != il) continue;
      const LayerMember member = layer_member(t.weight);
      if (member.values != nullptr) {
        const std::vector<float>& v = l.host->*member.values;
        if (v.empty() || l.vectors.count(t.weight) > 0) continue;
        vulkan::Buffer b = make_buffer(v.size() * 4, t.name);
        vulkan::upload(*context_, b, v.data(), v.size() * 4);
        l.vectors.emplace(t.weight, std::move(b));
      } else if (member.matrix != nullptr) {
        const PackedMatrix& m = l.host->*member.matrix;
        if (m.rows() > 0) l.matrices.emplace(t.weight, upload_matrices({&m}, t.name));
      } else if (member.matrices != nullptr) {
        // attn_kv_b (older MLA files) holds both per-head products: k_b and v_b; Gemma 4's
        // ffn_gate_up_exps both the experts' gate rows and their up rows.
        using Part = std::pair<LayerWeight, const std::vector<PackedMatrix>*>;
        std::vector<Part> parts = {{t.weight, &(l.host->*member.matrices)}};
        if (t.weight == LayerWeight::kAttnKvB) {
          parts = {{LayerWeight::kAttnKB, &l.host->k_b}, {LayerWeight::kAttnVB, &l.host->v_b}};
        } else if (t.weight == LayerWeight::kGateUpExps) {
          parts = {{LayerWeight::kGateExps, &l.host->gate_exps},
                   {LayerWeight::kUpExps, &l.host->up_exps}};
        }
        for (const auto& [key, all] : parts) {
          std::vector<const PackedMatrix*> ms;
          for (const PackedMatrix& m : *all) ms.push_back(&m);
          if (ms.empty()) continue;
          DeviceMatrix stack = upload_matrices(ms, t.name);
          stack.n_expert = int64_t(ms.size());  // a stack even of one expert or head
          l.matrices.emplace(key, std::move(stack));
        }
      }
    }
  }
  if (s.spec.output && s.n_vocab > 0) {
    output_ = upload_matrices({&s.output}, "output");
    output_norm_ = make_buffer(s.output_norm.size() * 4, "output_norm.weight");
    vulkan::upload(*context_, output_norm_, s.output_norm.data(), s.output_norm.size() * 4);
  }
  if (s.per_layer_embd != nullptr) {
    per_layer_proj_ = upload_matrices({&s.per_layer_model_proj}, "per_layer_model_proj.weight");
    // Times 1/sqrt 2, which the CPU applies to the sum with the embedding rows (the host
    // scales those): one rounding more or less.
    std::vector<float> norm = s.per_layer_proj_norm;
    for (float& w : norm) w *= 1.0f / std::sqrt(2.0f);
    per_layer_norm_ = make_buffer(norm.size() * 4, "per_layer_proj_norm.weight");
    vulkan::upload(*context_, per_layer_norm_, norm.data(), norm.size() * 4);
  }
  // The experts the shard holds, by global id: their index in its stacks, or none.
  if (hp.n_expert > 0 && int64_t(s.experts.size()) < hp.n_expert) {
    std::vector<uint32_t> local(size_t(hp.n_expert), 0xffffffffu);
    for (size_t i = 0; i < s.experts.size(); ++i) local[size_t(s.experts[i])] = uint32_t(i);
    expert_index_ = make_buffer(local.size() * 4, "held experts");
    vulkan::upload(*context_, expert_index_, local.data(), local.size() * 4);
  }
  if (arch.attention == AttentionKind::kCompressed) load_ds4();
  // The host's pages of the weights are dead weight now (the forward reads the device's
  // copies), but for the token embedding, whose rows the host looks up.
  for (const TensorSpec& t : info.tensors) {
    if (t.name == "token_embd.weight" || t.layer < s.spec.layer_begin ||
        t.layer >= s.spec.layer_end) {
      continue;
    }
    if (const gguf::TensorInfo* in_file = file.find_tensor(t.name)) file.release(*in_file);
  }
  reserve(std::max<int64_t>(1, s.options.n_batch));
}

std::string VulkanBackend::describe() const {
  return "vulkan:" + std::to_string(context_->info().index) + " " + context_->info().name + ", " +
         mib(device_bytes_);
}

void VulkanBackend::reserve(int64_t n) {
  if (n <= capacity_) return;
  const HParams& hp = s_.hp;
  const int64_t width = hp.hidden_width();
  auto floats = [&](int64_t count, const char* what) {
    return make_buffer(size_t(std::max<int64_t>(count, 1)) * 4, what);
  };
  // Every buffer below is made again: the old ones' bytes leave the count, the new ones'
  // (make_buffer adds them) are the activations' from here on.
  device_bytes_ -= activation_bytes_;
  const size_t before = device_bytes_;
  const int64_t n_used = std::max<int64_t>(1, hp.n_expert_used);
  x_ = floats(n * width, "activations");
  h_ = floats(n * n_embd_, "normed activations");
  q_ = floats(n * q_dim_, "queries");
  k_ = floats(n * kv_dim_, "keys");
  v_ = floats(n * kv_dim_, "values");
  attn_ = floats(n * s_.n_head * hp.head_dim_v, "attention outputs");
  proj_ = floats(n * n_embd_, "projections");
  ffn_a_ = floats(n * max_ff_, "FFN gates");
  ffn_b_ = floats(n * max_ff_, "FFN ups");
  shared_ = floats(n * n_embd_, "shared experts");
  logits_ = floats(n * std::max(s_.n_vocab, hp.n_expert), "logits");
  ids_ = floats(n * n_used, "experts");
  weights_ = floats(n * n_used, "expert weights");
  expert_out_ = floats(n * n_used * n_embd_, "expert outputs");
  out_ = floats(n * std::max(s_.n_vocab, width), "output");
  k_rows_ = floats(n, "cache rows");
  width_rows_.clear();
  for (size_t g = 0; g < row_widths_.size(); ++g) width_rows_.push_back(floats(n, "cache rows"));
  if (per_layer_ > 0) {
    const int64_t all = (s_.spec.layer_end - s_.spec.layer_begin) * per_layer_;
    per_layer_in_ = floats(n * all, "per-layer inputs");
    per_layer_tmp_ = floats(n * std::max(all, per_layer_), "per-layer scratch");
    per_layer_gate_ = floats(n * per_layer_, "per-layer gates");
  }
  if (s_.arch->moe_beside_dense) {
    expert_scales_ = floats(n * n_used, "expert scales");
    scaled_weights_ = floats(n * n_used, "scaled expert weights");
  }
  if (mla_) {
    const int64_t nope = hp.head_dim - hp.n_rot, latent = kv_dim_;
    mla_a_ = floats(n * std::max(hp.q_lora_rank, hp.kv_lora_rank), "MLA query latents");
    mla_nope_ = floats(n * s_.n_head * nope, "MLA nope queries");
    mla_lat_ = floats(n * s_.n_head * hp.kv_lora_rank, "MLA latent queries");
    mla_q_ = floats(n * s_.n_head * latent, "MLA queries");
    // Slot j of every token is head j: the per-head products run as experts chosen by id.
    std::vector<uint32_t> heads(size_t(n * s_.n_head));
    for (size_t i = 0; i < heads.size(); ++i) heads[i] = uint32_t(i % size_t(s_.n_head));
    head_ids_ = floats(int64_t(heads.size()), "MLA head ids");
    vulkan::upload(*context_, head_ids_, heads.data(), heads.size() * 4);
  }
  reserve_delta(n);
  angles_.clear();
  angles_at_.assign(ropes_.size(), 0);
  for (size_t g = 0; g < ropes_.size(); ++g) angles_.push_back(floats(n * max_rot_, "angles"));
  // What a step sends: its input rows, each rope group's angles, the cache rows (of each
  // width), the per-layer inputs' embedding rows (and after the first stage the tokens').
  const int64_t per_layer_rows = per_layer_ > 0
                                     ? per_layer_ * (s_.spec.layer_end - s_.spec.layer_begin) +
                                           (s_.spec.embedding ? 0 : n_embd_)
                                     : 0;
  const size_t up = size_t(n * width + int64_t(ropes_.size()) * n * max_rot_ + 2 * n +
                           int64_t(row_widths_.size()) * n + n * per_layer_rows) *
                    4;
  upload_ = make_buffer(up, "uploads", vulkan::BufferKind::kStaging);
  download_ = make_buffer(size_t(n * std::max(s_.n_vocab, width)) * 4, "downloads",
                          vulkan::BufferKind::kStaging);
  // The attention's scores: a token's row is as long as the positions it sees; a chunk is
  // cut into calls whose rows fit (vulkan_forward.cpp), at least one token's for every head.
  const int64_t one_token = s_.n_head * s_.kv.n_ctx();
  scores_floats_ = std::max<int64_t>(one_token, std::min<int64_t>(n * one_token, 1 << 22));
  scores_ = floats(scores_floats_, "attention scores");
  if (ds4_) reserve_ds4(n);
  activation_bytes_ = device_bytes_ - before;
  capacity_ = n;
}

}  // namespace herd::engine
