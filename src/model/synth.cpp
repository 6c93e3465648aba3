#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/builtin_vocab.h"
#include "model/file_type.h"
#include "util/error.h"

namespace herd {
namespace {

// A small, fast, portable generator (splitmix64 seeding xoshiro256**): the same seed gives
// the same model on every platform, unlike std::normal_distribution.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : state_) s = splitmix(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Approximately standard normal: the sum of four 16-bit uniforms (Irwin-Hall), centred
  // and scaled to unit variance. One generator call and no transcendental functions per
  // value, which makes writing a billion weights take seconds rather than a minute; the
  // tails stop at +-3.46 sigma, which random test weights do not miss.
  float normal() {
    uint64_t r = next();
    uint32_t sum = static_cast<uint32_t>(r & 0xFFFF) + static_cast<uint32_t>((r >> 16) & 0xFFFF) +
                   static_cast<uint32_t>((r >> 32) & 0xFFFF) + static_cast<uint32_t>(r >> 48);
    constexpr float kMean = 2.0f * 65535.0f;
    constexpr float kScale = 1.7320508f / 65535.0f;  // sqrt(3) / 65535: unit variance
    return (static_cast<float>(sum) - kMean) * kScale;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t state_[4];
};

// How a weight's values are drawn: value = mean + scale * N(0, 1).
struct Init {
  float mean;
  float scale;
};

Init init_for(const TensorSpec& t) {
  const float fan_in = static_cast<float>(t.shape[0]);
  switch (t.role) {
    case TensorRole::kEmbedding:
      return {0.0f, 0.5f};
    case TensorRole::kNorm:
      return {1.0f, 0.1f};
    case TensorRole::kBias:
      return {0.0f, 0.1f};
    case TensorRole::kRouter:
    case TensorRole::kOutput:
      return {0.0f, 2.0f / std::sqrt(fan_in)};
    default:
      return {0.0f, 1.0f / std::sqrt(fan_in)};
  }
}

// Fills row `row` of tensor `index` with values drawn from its own stream, so that rows can
// be generated in any order and on any thread with the same result.
void draw_row(uint64_t seed, size_t index, int64_t row, Init init, std::vector<float>& out) {
  Rng rng(seed ^ (0x100000001b3ULL * (index + 1)) ^ (static_cast<uint64_t>(row) << 32));
  for (float& x : out) x = init.mean + init.scale * rng.normal();
}

// Writes the tokenizer.* metadata: copied from a vocabulary file, or the built-in one.
int64_t write_vocab(gguf::Writer& w, const std::string& vocab_path) {
  if (vocab_path.empty()) {
    BuiltinVocab v = make_builtin_vocab();
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    w.set_i32_array("tokenizer.ggml.token_type", v.token_types);
    w.set_string_array("tokenizer.ggml.merges", v.merges);
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
    w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    w.set_string("tokenizer.chat_template", v.chat_template);
    return static_cast<int64_t>(v.tokens.size());
  }
  gguf::File vocab = gguf::File::open(vocab_path);
  if (!vocab.has("tokenizer.ggml.tokens")) {
    throw Error("synth", "'" + vocab_path + "' has no tokenizer.ggml.tokens: not a vocabulary");
  }
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.starts_with("tokenizer.")) w.set_value(key, value);
  }
  return static_cast<int64_t>(vocab.get_string_array("tokenizer.ggml.tokens").size());
}

void write_hparams(gguf::Writer& w, const ArchSpec& arch, const HParams& hp, const FileType& ft) {
  const std::string a(arch.name);
  w.set_string("general.architecture", a);
  w.set_string("general.name", "herd synthetic " + a);
  w.set_u32("general.file_type", ft.gguf_id);
  w.set_u32("general.quantization_version", 2);
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(hp.n_vocab));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(hp.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(hp.n_embd));
  w.set_u32(a + ".block_count", static_cast<uint32_t>(hp.n_layer));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(arch.moe ? 0 : hp.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(hp.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(hp.n_head_kv));
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", hp.rms_eps);
  w.set_f32(a + ".rope.freq_base", hp.rope_base);
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(hp.head_dim));
  if (arch.explicit_head_dim) {
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(hp.head_dim));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(hp.head_dim));
  }
  if (arch.moe) {
    w.set_u32(a + ".expert_count", static_cast<uint32_t>(hp.n_expert));
    w.set_u32(a + ".expert_used_count", static_cast<uint32_t>(hp.n_expert_used));
    w.set_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(hp.n_ff_expert));
  }
}

[[noreturn]] void bad_option(const std::string& message) {
  throw Error("synth", message);
}

}  // namespace

HParams synth_hparams(const SynthOptions& o, int64_t n_vocab) {
  const ArchSpec* arch = find_arch(o.arch);
  if (arch == nullptr) bad_option("unknown architecture '" + o.arch + "'");
  HParams hp;
  hp.n_vocab = n_vocab;
  hp.n_embd = o.n_embd;
  hp.n_layer = o.n_layer;
  hp.n_head = o.n_head;
  hp.n_head_kv = o.n_head_kv > 0 ? o.n_head_kv : std::max<int64_t>(1, o.n_head / 2);
  hp.n_ctx = o.n_ctx;
  hp.rms_eps = arch->default_rms_eps;
  hp.rope_base = arch->default_rope_base;
  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_head <= 0 || hp.n_ctx <= 0) {
    bad_option("--embd, --layers, --heads and the context length must be positive");
  }
  if (o.head_dim > 0) {
    if (!arch->explicit_head_dim && o.head_dim * hp.n_head != hp.n_embd) {
      bad_option("--head-dim " + std::to_string(o.head_dim) + " x --heads " +
                 std::to_string(hp.n_head) + " must equal --embd for " + o.arch);
    }
    hp.head_dim = o.head_dim;
  } else {
    if (hp.n_embd % hp.n_head != 0) {
      bad_option("--embd " + std::to_string(hp.n_embd) + " is not a multiple of --heads " +
                 std::to_string(hp.n_head));
    }
    hp.head_dim = hp.n_embd / hp.n_head;
  }
  if (hp.head_dim % 2 != 0) bad_option("the head size must be even for rope");
  hp.head_dim_v = hp.n_rot = hp.head_dim;
  if (hp.n_head % hp.n_head_kv != 0) {
    bad_option("--heads " + std::to_string(hp.n_head) + " is not a multiple of --kv-heads " +
               std::to_string(hp.n_head_kv));
  }
  hp.n_ff = o.n_ff > 0 ? o.n_ff : (3 * hp.n_embd + 63) / 64 * 64;
  if (arch->moe) {
    hp.n_expert = o.n_expert;
    hp.n_expert_used = o.n_expert_used;
    hp.n_ff_expert = o.n_ff_expert > 0 ? o.n_ff_expert : (o.n_ff > 0 ? o.n_ff : hp.n_embd / 2);
    if (hp.n_expert < 1 || hp.n_expert_used < 1 || hp.n_expert_used > hp.n_expert) {
      bad_option("need 1 <= --experts-used <= --experts");
    }
    hp.n_ff = 0;
  }
  return hp;
}

void synthesize(const SynthOptions& o) {
  const ArchSpec* arch = find_arch(o.arch);
  if (arch == nullptr) bad_option("unknown architecture '" + o.arch + "'");
  std::optional<FileType> ft = find_file_type(o.type);
  if (!ft) bad_option("unknown --type '" + o.type + "'");
  if (o.out_path.empty()) bad_option("no output path");

  gguf::Writer w;
  // Hyper-parameters depend on the vocabulary size, so the vocabulary is read first; its
  // keys are written after the hyper-parameters, as converters do.
  gguf::Writer vocab_keys;
  int64_t n_vocab = write_vocab(vocab_keys, o.vocab_path);
  if (!o.chat_template_path.empty()) {
    std::ifstream in(o.chat_template_path, std::ios::binary);
    if (!in) throw Error("synth", "cannot read the chat template '" + o.chat_template_path + "'");
    vocab_keys.set_string("tokenizer.chat_template",
                          std::string(std::istreambuf_iterator<char>(in), {}));
  }
  HParams hp = synth_hparams(o, n_vocab);
  write_hparams(w, *arch, hp, *ft);
  w.append(vocab_keys);

  std::vector<TensorSpec> specs = model_tensors(*arch, hp);
  std::vector<TensorType> types;
  for (const TensorSpec& t : specs) {
    types.push_back(tensor_type_for(*ft, t, hp));
    w.add_tensor(t.name, types.back(), t.shape);
  }

  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const uint64_t total = w.total_tensor_bytes();
  uint64_t done = 0;
  w.write(o.out_path, [&](size_t index, std::span<uint8_t> out) {
    const TensorSpec& t = specs[index];
    const TypeTraits& traits = type_traits(types[index]);
    const int64_t n_cols = t.shape[0];
    const int64_t n_rows = static_cast<int64_t>(t.shape.size() > 1 ? t.shape[1] : 1) *
                           (t.shape.size() > 2 ? t.shape[2] : 1);
    const size_t row_size = row_bytes(types[index], n_cols);
    const Init init = init_for(t);
    // Rows are independent: split them over the threads in contiguous ranges.
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<float> row(static_cast<size_t>(n_cols));
      for (int64_t r = begin; r < end; ++r) {
        draw_row(o.seed, index, r, init, row);
        traits.quantize(row.data(), out.data() + static_cast<size_t>(r) * row_size, n_cols);
      }
    };
    const int64_t n_threads = std::min<int64_t>(threads, std::max<int64_t>(1, n_rows / 16));
    std::vector<std::thread> pool;
    for (int64_t k = 1; k < n_threads; ++k) {
      pool.emplace_back(work, n_rows * k / n_threads, n_rows * (k + 1) / n_threads);
    }
    work(0, n_rows / n_threads);
    for (std::thread& th : pool) th.join();
    done += out.size();
    if (o.progress) o.progress(done, total);
  });
}

}  // namespace herd
