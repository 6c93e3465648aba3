#include "model/model_info.h"

#include "util/error.h"

namespace herd {
namespace {

[[noreturn]] void fail(const gguf::File& f, const std::string& what) {
  throw Error("model", "'" + f.origin() + "': " + what);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

ModelInfo read_model_info(const gguf::File& f, bool partial) {
  ModelInfo info;
  const std::string arch_name(f.get_string("general.architecture"));
  info.arch = find_arch(arch_name);
  if (info.arch == nullptr) {
    std::string known;
    for (auto a : arch_names()) known += (known.empty() ? "" : ", ") + std::string(a);
    fail(f, "architecture '" + arch_name + "' is not supported (supported: " + known + ")");
  }
  const ArchSpec& arch = *info.arch;
  const std::string a = arch_name + ".";
  HParams& hp = info.hp;
  auto positive = [&](const std::string& key) {
    uint64_t v = f.get_u64(key);
    if (v == 0 || v > (1ull << 31))
      fail(f, "'" + key + "' = " + std::to_string(v) + " is out of range");
    return static_cast<int64_t>(v);
  };
  hp.n_embd = positive(a + "embedding_length");
  hp.n_layer = positive(a + "block_count");
  hp.n_head = positive(a + "attention.head_count");
  hp.n_head_kv =
      f.has(a + "attention.head_count_kv") ? positive(a + "attention.head_count_kv") : hp.n_head;
  hp.n_ctx = positive(a + "context_length");
  hp.rms_eps = f.get_f32_opt(a + "attention.layer_norm_rms_epsilon").value_or(arch.default_rms_eps);
  hp.rope_base = f.get_f32_opt(a + "rope.freq_base").value_or(arch.default_rope_base);
  if (f.has(a + "attention.key_length")) {
    hp.head_dim = positive(a + "attention.key_length");
    if (f.has(a + "attention.value_length") &&
        positive(a + "attention.value_length") != hp.head_dim) {
      fail(f, "different key and value head sizes are not supported");
    }
  } else {
    if (hp.n_embd % hp.n_head != 0) fail(f, "embedding_length is not a multiple of head_count");
    hp.head_dim = hp.n_embd / hp.n_head;
  }
  if (hp.n_head % hp.n_head_kv != 0) {
    fail(f, "head_count " + std::to_string(hp.n_head) + " is not a multiple of head_count_kv " +
                std::to_string(hp.n_head_kv));
  }
  if (f.has(a + "rope.dimension_count") && positive(a + "rope.dimension_count") != hp.head_dim) {
    fail(f, "partial rotary embeddings (rope.dimension_count != head size) are not supported");
  }
  if (arch.moe) {
    hp.n_expert = positive(a + "expert_count");
    hp.n_expert_used = positive(a + "expert_used_count");
    if (hp.n_expert_used > hp.n_expert) fail(f, "expert_used_count exceeds expert_count");
    // The first layer the file holds (a partial file may start anywhere).
    const gguf::TensorInfo* gate = nullptr;
    for (int64_t il = 0; il < hp.n_layer && gate == nullptr; ++il) {
      gate = f.find_tensor("blk." + std::to_string(il) + ".ffn_gate_exps.weight");
      if (!partial) break;
    }
    hp.n_ff_expert = f.has(a + "expert_feed_forward_length")
                         ? positive(a + "expert_feed_forward_length")
                     : gate != nullptr && gate->shape.size() == 3 ? gate->shape[1]
                                                                  : 0;
    if (hp.n_ff_expert == 0) fail(f, "missing '" + a + "expert_feed_forward_length'");
  } else {
    hp.n_ff = positive(a + "feed_forward_length");
  }
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  const gguf::TensorInfo* head = f.find_tensor("output.weight");
  const std::optional<FileSlice> held = read_slice_metadata(f);
  // A cut output head shows only some of the vocabulary; token_embd is never cut.
  const gguf::TensorInfo* vocab_rows = embd != nullptr ? embd : partial && !held ? head : nullptr;
  if (vocab_rows == nullptr && !partial) fail(f, "missing tensor 'token_embd.weight'");
  if (vocab_rows != nullptr) {
    if (vocab_rows->shape.size() != 2) fail(f, std::string(vocab_rows->name) + " must be 2-D");
    hp.n_vocab = vocab_rows->shape[1];
  }
  if (held) {
    if (vocab_rows != nullptr && hp.n_vocab != held->n_vocab) {
      fail(f, "herd.slice.n_vocab " + std::to_string(held->n_vocab) + " disagrees with " +
                  std::string(vocab_rows->name));
    }
    hp.n_vocab = held->n_vocab;
    info.file_slice = held->slice;
  }
  hp.tied_output = head == nullptr;

  for (const TensorSpec& spec : model_tensors(arch, hp)) {
    const gguf::TensorInfo* t = f.find_tensor(spec.name);
    if (t == nullptr && partial) continue;
    if (t == nullptr) fail(f, "missing tensor '" + spec.name + "'");
    const std::vector<int64_t> expected =
        held ? cut_shape(spec.name, t->type, spec.shape, weight_cut(spec, held->slice, hp))
             : spec.shape;
    if (t->shape != expected) {
      fail(f, "tensor '" + spec.name + "' has shape " + shape_text(t->shape) + ", expected " +
                  shape_text(expected) + (held ? " (the file's slice of it)" : ""));
    }
    info.weight_bytes += t->n_bytes;
    info.tensors.push_back(spec);
  }
  if (const gguf::TensorInfo* freqs = f.find_tensor("rope_freqs.weight")) {
    if (freqs->shape != std::vector<int64_t>{hp.head_dim / 2} || freqs->type != TensorType::F32) {
      fail(f, "rope_freqs.weight must be f32 of shape [" + std::to_string(hp.head_dim / 2) + "]");
    }
    info.has_rope_freqs = true;
  }
  return info;
}

const TensorSpec* find_tensor_spec(const ModelInfo& info, std::string_view name) {
  for (const TensorSpec& spec : info.tensors) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

}  // namespace herd
