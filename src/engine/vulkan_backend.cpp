// Loading a shard onto a Vulkan device: every weight its layers read, uploaded once in its
// GGUF layout (the shaders decode each type); the norms and biases as the host Layer holds
// them (floats); an F16 KV cache per layer. The forward pass is vulkan_forward.cpp.
#include <algorithm>
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
  runtime_ = vulkan_runtime(index);
  context_ = runtime_->context.get();
  kernels_ = runtime_->kernels.get();
  recorder_ = std::make_unique<vulkan::Recorder>(*context_);
  // Uploads submit on the shared queue.
  std::lock_guard<std::mutex> lock(runtime_->mutex);
  n_embd_ = hp.n_embd;
  q_dim_ = s.n_head * hp.head_dim;
  kv_dim_ = s.n_head_kv * hp.head_dim;

  // Every tensor of the shard's layers (and its head), and the bytes to upload.
  std::vector<const TensorSpec*> tensors;
  size_t total = 0, done = 0;
  for (const TensorSpec& t : info.tensors) {
    if (t.layer < s.spec.layer_begin || t.layer >= s.spec.layer_end) continue;
    const LayerMember member = layer_member(t.weight);
    if (member.matrix == nullptr && member.matrices == nullptr && member.values == nullptr) {
      continue;
    }
    const gguf::TensorInfo* in_file = file.find_tensor(t.name);
    if (in_file == nullptr) continue;  // optional (a bias, a q/k norm) and absent
    tensors.push_back(&t);
    total += member.values != nullptr ? 0 : in_file->n_bytes;
  }
  const char* head_name = hp.tied_output ? "token_embd.weight" : "output.weight";
  if (s.spec.output) total += file.tensor(head_name).n_bytes;
  auto report = [&](size_t bytes) {
    done += bytes;
    if (progress) progress(done, total);
  };
  // A matrix (or a stack of experts) as the file holds it.
  auto upload_matrix = [&](const gguf::TensorInfo& t, const std::string& what) {
    if (!vulkan::Kernels::has_matvec(t.type)) {
      throw Error("engine", "tensor '" + std::string(t.name) + "' is " +
                                std::string(type_traits(t.type).name) +
                                ", which the Vulkan backend has no shader for yet");
    }
    DeviceMatrix m;
    m.type = t.type;
    m.cols = t.shape[0];
    m.rows = t.shape.size() > 1 ? t.shape[1] : 1;
    m.n_expert = t.shape.size() > 2 ? t.shape[2] : 0;
    m.buffer = make_buffer(t.n_bytes, what);
    vulkan::upload(*context_, m.buffer, t.data, t.n_bytes);
    report(t.n_bytes);
    // The host's pages of it are dead weight now (the forward reads the device's copy), but
    // for the token embedding, whose rows the host looks up.
    if (t.name != "token_embd.weight") file.release(t);
    return m;
  };

  layers_.resize(s.layers.size());
  for (size_t i = 0; i < s.layers.size(); ++i) {
    DeviceLayer& l = layers_[i];
    l.host = &s.layers[i];
    const LayerOptions& lo = l.host->options;
    if (lo.hash_routed || !lo.own_kv || !lo.has_v) {
      throw Error("engine", "layer " + std::to_string(s.spec.layer_begin + int64_t(i)) +
                                " on a Vulkan device: hash routing and shared keys and values "
                                "not yet on the Vulkan backend (run it with --device cpu)");
    }
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
    // The KV cache: keys and values of every slot's positions, rounded to f16.
    const size_t cache_bytes = size_t(s.kv.n_seq() * s.kv.n_ctx() * kv_dim_) * 2;
    l.k_cache = make_buffer(cache_bytes, "keys of layer " + std::to_string(i));
    l.v_cache = make_buffer(cache_bytes, "values of layer " + std::to_string(i));
  }
  for (const TensorSpec* t : tensors) {
    DeviceLayer& l = layers_[size_t(t->layer - s.spec.layer_begin)];
    const LayerMember member = layer_member(t->weight);
    if (member.values != nullptr) {
      const std::vector<float>& v = l.host->*member.values;
      if (v.empty()) continue;
      vulkan::Buffer b = make_buffer(v.size() * 4, t->name);
      vulkan::upload(*context_, b, v.data(), v.size() * 4);
      l.vectors.emplace(t->weight, std::move(b));
    } else {
      l.matrices.emplace(t->weight, upload_matrix(file.tensor(t->name), t->name));
    }
  }
  if (s.spec.output) {
    output_ = upload_matrix(file.tensor(head_name), head_name);
    output_norm_ = make_buffer(s.output_norm.size() * 4, "output_norm.weight");
    vulkan::upload(*context_, output_norm_, s.output_norm.data(), s.output_norm.size() * 4);
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
  // Resizing: the old buffers' bytes leave the count first.
  device_bytes_ -= x_.bytes() + h_.bytes() + q_.bytes() + k_.bytes() + v_.bytes() + attn_.bytes() +
                   proj_.bytes() + ffn_a_.bytes() + ffn_b_.bytes() + shared_.bytes() +
                   logits_.bytes() + ids_.bytes() + weights_.bytes() + expert_out_.bytes() +
                   out_.bytes() + k_rows_.bytes() + upload_.bytes() + download_.bytes();
  for (const vulkan::Buffer& a : angles_) device_bytes_ -= a.bytes();
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
  angles_.clear();
  for (size_t g = 0; g < ropes_.size(); ++g) angles_.push_back(floats(n * max_rot_, "angles"));
  // What a step sends: its input rows, each rope group's angles, the cache rows.
  const size_t up = size_t(n * width + int64_t(ropes_.size()) * n * max_rot_ + 2 * n) * 4;
  upload_ = make_buffer(up, "uploads", vulkan::BufferKind::kStaging);
  download_ = make_buffer(size_t(n * std::max(s_.n_vocab, width)) * 4, "downloads",
                          vulkan::BufferKind::kStaging);
  // The attention's scores: a token's row is as long as the positions it sees; a chunk is
  // cut into calls whose rows fit (vulkan_forward.cpp), at least one token's for every head.
  const int64_t one_token = s_.n_head * s_.kv.n_ctx();
  if (scores_.bytes() == 0) {
    scores_floats_ = std::max<int64_t>(one_token, std::min<int64_t>(n * one_token, 1 << 22));
    scores_ = floats(scores_floats_, "attention scores");
  }
  capacity_ = n;
}

}  // namespace herd::engine
