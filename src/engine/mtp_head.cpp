#include "engine/mtp_head.h"

#include <algorithm>
#include <cmath>

#include "engine/ops.h"
#include "quant/types.h"
#include "util/error.h"

namespace herd::engine {
namespace {

std::vector<float> load_norm(const gguf::File& file, const std::string& name, int64_t n) {
  const gguf::TensorInfo& t = file.tensor(name);
  if (t.n_elements != n) {
    throw Error("engine", "tensor '" + name + "' has " + std::to_string(t.n_elements) +
                              " values, expected " + std::to_string(n));
  }
  std::vector<float> out(static_cast<size_t>(n));
  type_traits(t.type).dequantize(t.data, out.data(), n);
  return out;
}

// Packs the 2-D tensor `name`, checked to be [cols, rows].
kernels::PackedMatrix pack_named(const gguf::File& file, const std::string& name, int64_t cols,
                                 int64_t rows, kernels::Isa isa) {
  const gguf::TensorInfo& t = file.tensor(name);
  if (t.shape != std::vector<int64_t>{cols, rows}) {
    throw Error("engine", "tensor '" + name + "' must have shape [" + std::to_string(cols) + ", " +
                              std::to_string(rows) + "]");
  }
  return kernels::pack_matrix({t.type, rows, cols, t.data}, isa);
}

}  // namespace

MtpHead::MtpHead(Shard shard, const HParams& hp)
    : shard_(std::move(shard)),
      n_embd_(hp.n_embd),
      n_vocab_(hp.n_vocab),
      rms_eps_(hp.rms_eps),
      final_softcap_(hp.final_softcap) {}
MtpHead::MtpHead(MtpHead&&) noexcept = default;
MtpHead& MtpHead::operator=(MtpHead&&) noexcept = default;
MtpHead::~MtpHead() = default;

int64_t MtpHead::n_embd() const {
  return n_embd_;
}
int64_t MtpHead::n_vocab() const {
  return n_vocab_;
}

MtpHead MtpHead::load(const gguf::File& file, const ModelInfo& info, ShardOptions options,
                      const kernels::PackedMatrix* model_head) {
  const ArchSpec& arch = *info.arch;
  if (arch.attention == AttentionKind::kCompressed || arch.hyper_connections) {
    throw Error("engine", std::string(arch.name) + ": its NextN blocks are not run yet");
  }
  const ModelInfo mtp = mtp_model_info(info);  // throws when there is no NextN block
  // The head runs on the CPU: the main model's hidden states are read there.
  options.device = Device{};
  ShardSpec spec;
  spec.layer_begin = info.hp.n_layer;  // the first NextN block: the one the references chain
  spec.layer_end = info.hp.n_layer + 1;
  spec.embedding = false;
  spec.output = false;
  MtpHead head(Shard::load(file, mtp, spec, options), info.hp);
  const int64_t n_embd = info.hp.n_embd, n_vocab = info.hp.n_vocab;
  const std::string blk = "blk." + std::to_string(info.hp.n_layer) + ".nextn.";
  head.enorm_ = load_norm(file, blk + "enorm.weight", n_embd);
  head.hnorm_ = load_norm(file, blk + "hnorm.weight", n_embd);
  head.shared_head_norm_ = load_norm(file, blk + "shared_head_norm.weight", n_embd);
  head.eh_proj_ = pack_named(file, blk + "eh_proj.weight", 2 * n_embd, n_embd, options.isa);
  // The optional parts default to the model's own (GLM-4.6 and converted DeepSeek V3 files
  // leave them out); the model's head is the main shard's where it is given.
  const gguf::TensorInfo* embed = file.find_tensor(blk + "embed_tokens.weight");
  head.embed_ = embed != nullptr ? embed : &file.tensor("token_embd.weight");
  if (head.embed_->shape != std::vector<int64_t>{n_embd, n_vocab}) {
    throw Error("engine", "tensor '" + std::string(head.embed_->name) + "' must have shape [" +
                              std::to_string(n_embd) + ", " + std::to_string(n_vocab) + "]");
  }
  std::string head_name = blk + "shared_head_head.weight";
  if (file.find_tensor(head_name) == nullptr) {
    if (model_head != nullptr && model_head->rows() == n_vocab && model_head->cols() == n_embd) {
      head.shared_head_ = model_head;
      return head;
    }
    head_name = info.hp.tied_output ? "token_embd.weight" : "output.weight";
  }
  head.own_head_ = pack_named(file, head_name, n_embd, n_vocab, options.isa);
  return head;
}

void MtpHead::forward(std::span<const MtpInput> rows, std::vector<float>& logits,
                      std::vector<float>& hidden, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t e = n_embd_;
  batch_.clear();
  joined_.resize(static_cast<size_t>(n * 2 * e));  // [n][enorm(embed(t)) | hnorm(h)]
  projected_.resize(static_cast<size_t>(n * e));   // [n][n_embd]
  const TypeTraits& tt = type_traits(embed_->type);
  const size_t embed_row = row_bytes(embed_->type, e);
  for (int64_t i = 0; i < n; ++i) {
    const MtpInput& r = rows[static_cast<size_t>(i)];
    if (r.token < 0 || r.token >= n_vocab_) {
      throw Error("engine", "token id " + std::to_string(r.token) +
                                " is outside the vocabulary of " + std::to_string(n_vocab_));
    }
    float* joined = joined_.data() + i * 2 * e;
    float* embedded = projected_.data() + i * e;  // scratch until the projection
    tt.dequantize(embed_->data + embed_row * static_cast<size_t>(r.token), embedded, e);
    rms_norm(embedded, enorm_.data(), e, rms_eps_, joined);
    if (r.hidden != nullptr) {
      rms_norm(r.hidden, hnorm_.data(), e, rms_eps_, joined + e);
    } else {
      std::fill_n(joined + e, e, 0.0f);  // hnorm of a zero state
    }
    batch_.add(r.token, r.seq, r.pos + 1, true);
  }
  kernels::matmul(eh_proj_, joined_.data(), n, projected_.data(), pool, workspace_);
  shard_.forward(batch_, projected_.data(), hidden, pool);  // [n][n_embd]
  normed_.resize(static_cast<size_t>(n * e));
  for (int64_t i = 0; i < n; ++i) {
    rms_norm(hidden.data() + i * e, shared_head_norm_.data(), e, rms_eps_, normed_.data() + i * e);
  }
  logits.resize(static_cast<size_t>(n * n_vocab_));  // [n][n_vocab]
  const kernels::PackedMatrix& head = shared_head_ != nullptr ? *shared_head_ : own_head_;
  kernels::matmul(head, normed_.data(), n, logits.data(), pool, workspace_);
  if (final_softcap_ > 0) {
    for (float& logit : logits) logit = final_softcap_ * std::tanh(logit / final_softcap_);
  }
}

void MtpHead::draft(std::span<const MtpInput> rows, int k, std::vector<MtpDraft>& drafts,
                    ThreadPool& pool) {
  // The caller's drafts are reused (their token vectors keep their capacity): no allocation
  // per step once warm.
  size_t n_slots = 0;
  chain_.clear();
  chain_rows_.clear();
  if (rows.empty() || k <= 0) {
    drafts.clear();
    return;
  }
  forward(rows, step_logits_, step_hidden_, pool);
  // Each slot's last row starts its chain; chain_rows_[j]: slot j's row in the step's output
  // (-1: its chain ended).
  for (size_t i = 0; i < rows.size(); ++i) {
    size_t j = 0;
    while (j < n_slots && drafts[j].seq != rows[i].seq) ++j;
    if (j == n_slots) {
      if (n_slots == drafts.size()) drafts.emplace_back();
      drafts[j].seq = rows[i].seq;
      drafts[j].tokens.clear();
      chain_.push_back({});
      chain_rows_.push_back(-1);
      ++n_slots;
    }
    chain_[j] = {rows[i].seq, rows[i].pos, nullptr, 0};
    chain_rows_[j] = static_cast<int64_t>(i);
  }
  drafts.resize(n_slots);
  const int64_t e = n_embd_;
  chain_hidden_.resize(chain_.size() * static_cast<size_t>(e));  // [slots][n_embd]
  for (int step = 0;; ++step) {
    inputs_.clear();
    for (size_t j = 0; j < chain_.size(); ++j) {
      const int64_t row = chain_rows_[j];
      if (row < 0) continue;
      const float* l = step_logits_.data() + row * n_vocab_;
      const auto best = static_cast<int32_t>(std::max_element(l, l + n_vocab_) - l);
      drafts[j].tokens.push_back(best);
      // The next step reads the head's hidden state at position pos + 1 and the guess for
      // pos + 2, where the head's next position is still inside the context.
      float* h = chain_hidden_.data() + static_cast<int64_t>(j) * e;
      std::copy_n(step_hidden_.data() + row * e, e, h);
      chain_[j] = {chain_[j].seq, chain_[j].pos + 1, h, best};
      chain_rows_[j] = -1;
      if (step + 1 < k && chain_[j].pos + 1 < shard_.n_ctx()) {
        chain_rows_[j] = static_cast<int64_t>(inputs_.size());
        inputs_.push_back(chain_[j]);
      }
    }
    if (inputs_.empty()) return;
    forward(inputs_, step_logits_, step_hidden_, pool);
  }
}

}  // namespace herd::engine
