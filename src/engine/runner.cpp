#include "engine/runner.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "engine/backend.h"
#include "engine/device_placement.h"
#include "kernels/matmul.h"
#include "util/cpu_info.h"
#include "util/error.h"

namespace herd::engine {

nlohmann::json ModelRunner::cluster_json() const {
  return nullptr;
}

LocalRunner::LocalRunner(gguf::File file, ModelInfo info, kernels::Isa isa)
    : file_(std::move(file)), info_(std::move(info)), isa_(isa) {}

std::unique_ptr<LocalRunner> LocalRunner::open(const std::string& path,
                                               const LocalOptions& options) {
  gguf::File file = gguf::File::open(path);
  ModelInfo info = read_model_info(file);
  ShardOptions shard_options;
  shard_options.n_ctx = options.n_ctx > 0 ? std::min(options.n_ctx, info.hp.n_ctx)
                                          : std::min(info.hp.n_ctx, kDefaultMaxCtx);
  shard_options.n_seq = options.n_seq;
  shard_options.mla_decompress_min_tokens = options.mla_decompress_min_tokens;
  shard_options.isa = kernels::best_isa(kernels::detect_cpu(), options.isa_limit);
  shard_options.n_threads = options.threads > 0 ? options.threads : default_thread_count();
  shard_options.upload_progress = options.upload_progress;
  // The rank points into the file's mapping, which moves with the File object unchanged.
  std::string note;
  shard_options.device = choose_device(options.device, *info.arch, info.hp, &note);
  const ExpertsChoice experts_choice = parse_experts_choice(options.experts);
  DevicePlacement placement;  // kDevice: all on the chosen device (or the CPU)
  if (shard_options.device.kind == Device::kCpu) {
    if (experts_choice == ExpertsChoice::kCpu) {
      throw Error("engine",
                  "--experts cpu keeps an MoE model's experts on the CPU beside a GPU: no GPU "
                  "device is chosen (--device)");
    }
    if (options.device_layers >= 0) {
      throw Error("engine", "--device-layers needs a GPU device (--device)");
    }
  } else {
    // The placement the planner would make (device_placement.h), from the device's memory.
    const PartBytes part = part_bytes(info, file, 0, info.hp.n_layer, true, true,
                                      shard_options.n_ctx, shard_options.n_seq);
    placement =
        place_on_device(part, device_memory_bytes(shard_options.device), kDeviceHeadroom,
                        experts_choice, options.device_layers, device_name(shard_options.device));
    // Said when the placement was the runner's choice, not the user's.
    if (placement.kind != DevicePlacement::kDevice && experts_choice == ExpertsChoice::kAuto &&
        options.device_layers < 0) {
      note = placement.why;
    }
  }
  // auto: a GPU that fails (memory, a weight type without a shader) leaves the CPU.
  std::unique_ptr<Rank> rank =
      open_rank(file, info, ShardSpec{}, shard_options, placement, options.device == "auto", &note);
  auto runner = std::unique_ptr<LocalRunner>(
      new LocalRunner(std::move(file), std::move(info), shard_options.isa));
  runner->rank_ = std::move(rank);
  runner->device_note_ = std::move(note);
  if (options.mtp && runner->info_.hp.n_nextn > 0) {
    const Rank& r = *runner->rank_;
    if (r.shard().device_index() >= 0 || r.cpu_stage() != nullptr) {
      throw Error("engine", "an MTP head needs the model on the CPU (--device cpu)");
    }
    runner->mtp_ = std::make_unique<MtpHead>(
        MtpHead::load(runner->file_, runner->info_, shard_options, r.shard().output_head()));
  }
  return runner;
}

std::string LocalRunner::describe() const {
  return rank_->describe(isa_);
}

RunnerStatus LocalRunner::status() const {
  const Shard& shard = rank_->shard();
  RunnerStatus s;
  s.threads = rank_->pool().size();
  s.isa = std::string(kernels::isa_name(isa_));
  s.device = shard.device();
  s.device_index = shard.device_index();
  s.device_bytes = shard.device_bytes();
  s.kv_cache_bytes = shard.kv_cache_bytes();
  s.packed_weight_bytes = shard.packed_weight_bytes();
  // One stage of one rank: every layer and head, here.
  RankStatus rank;
  rank.node = s.node;
  rank.address = "local";
  rank.head_end = hparams().n_head;
  rank.memory_bytes = info_.weight_bytes + s.packed_weight_bytes + s.kv_cache_bytes;
  s.stages.push_back({0, hparams().n_layer, {rank}});
  return s;
}

void LocalRunner::forward(const Batch& batch, std::vector<float>& logits) {
  rank_->forward(batch, nullptr, logits);
  if (mtp_ != nullptr) {
    mtp_last_.seq.assign(batch.seq.begin(), batch.seq.end());
    mtp_last_.pos.assign(batch.pos.begin(), batch.pos.end());
  }
}

int64_t LocalRunner::mtp_layers() const {
  return mtp_ != nullptr ? info_.hp.n_nextn : 0;
}

void LocalRunner::mtp_draft(std::span<const MtpStart> starts, int k,
                            std::vector<MtpDraft>& drafts) {
  if (mtp_ == nullptr) throw Error("engine", "the model's MTP head is not loaded");
  const std::span<const float> hidden = rank_->shard().last_hidden();  // [n][n_embd]
  const int64_t n_embd = info_.hp.n_embd;
  const auto n = static_cast<int64_t>(hidden.size()) / n_embd;
  mtp_inputs_.clear();
  for (const MtpStart& s : starts) {
    if (s.row == -1 && s.pos == -1) {  // a sequence's first token
      mtp_inputs_.push_back({s.seq, -1, nullptr, s.token});
      continue;
    }
    const auto row = static_cast<size_t>(s.row);
    if (s.row < 0 || s.row >= n || mtp_last_.seq[row] != s.seq || mtp_last_.pos[row] != s.pos) {
      throw Error("engine", "MTP start at row " + std::to_string(s.row) + " (slot " +
                                std::to_string(s.seq) + ", position " + std::to_string(s.pos) +
                                ") is not a row of the last forward pass");
    }
    mtp_inputs_.push_back({s.seq, s.pos, hidden.data() + s.row * n_embd, s.token});
  }
  mtp_->draft(mtp_inputs_, k, drafts, rank_->pool());
}

void LocalRunner::save_state(int32_t seq, int64_t pos) {
  if (!rank_->shard().has_recurrent_state() || pos <= 0) return;
  snapshots_.resize(static_cast<size_t>(rank_->shard().n_seq()));
  auto& mine = snapshots_.at(static_cast<size_t>(seq));
  std::erase_if(mine, [&](const RecurrentSnapshot& s) { return s.pos == pos; });
  if (mine.size() == kSnapshotsPerSlot) mine.erase(mine.begin());
  mine.push_back(rank_->shard().snapshot_state(seq));
  HERD_CHECK(mine.back().pos == pos);
}

void LocalRunner::hold_state(int32_t seq) {
  if (!rank_->shard().has_recurrent_state()) return;
  held_.resize(static_cast<size_t>(rank_->shard().n_seq()));
  held_.at(static_cast<size_t>(seq)) = rank_->shard().snapshot_state(seq);
}

void LocalRunner::return_to_held_state(int32_t seq) {
  if (!rank_->shard().has_recurrent_state()) return;
  if (static_cast<size_t>(seq) >= held_.size())
    throw Error("engine", "no state held for this slot");
  rank_->shard().restore_state(seq, held_[static_cast<size_t>(seq)]);
}

int64_t LocalRunner::restore_state(int32_t seq, int64_t at_most) {
  if (static_cast<size_t>(seq) >= snapshots_.size()) return 0;
  auto& mine = snapshots_[static_cast<size_t>(seq)];
  std::erase_if(mine, [&](const RecurrentSnapshot& s) { return s.pos > at_most; });
  const auto best = std::max_element(
      mine.begin(), mine.end(),
      [](const RecurrentSnapshot& a, const RecurrentSnapshot& b) { return a.pos < b.pos; });
  if (best == mine.end()) return 0;
  rank_->shard().restore_state(seq, *best);
  return best->pos;
}

}  // namespace herd::engine
