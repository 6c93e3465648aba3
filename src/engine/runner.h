// ModelRunner: what generation and serving talk to. It runs a Batch through the whole
// model and returns logits, however the model is laid out: the local one-stage plan
// (LocalRunner, one shard holding everything) or, later, a plan across nodes.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/batch.h"
#include "engine/cpu_experts.h"
#include "engine/mtp_head.h"
#include "engine/rank.h"
#include "engine/runner_status.h"
#include "engine/shard.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace herd::engine {

// A row of a runner's last forward() that an MTP head starts from: the row `row` (its index
// in that batch) of slot `seq` at position `pos`, and the token chosen for position pos + 1.
// A sequence's first token has none before it: row -1, pos -1 (MtpInput).
struct MtpStart {
  int32_t seq = 0;
  int32_t pos = 0;
  int64_t row = 0;
  int32_t token = 0;
};

// ModelRunner::forward's word that the runner lost the states of every slot (a pod formed
// again after a lost node, or with a node taken in): the batch did not run; every slot is
// empty, at position 0; snapshots (save_state) and held states (hold_state) are gone. It is
// said once per loss: a caller runs its sequences again from position 0 (the scheduler
// does) and the next forward runs.
class StatesLost : public Error {
 public:
  explicit StatesLost(const std::string& why)
      : Error("engine", "the slots' states were lost: " + why) {}
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const HParams& hparams() const = 0;
  virtual int64_t n_ctx() const = 0;
  virtual int64_t n_seq() const = 0;
  // logits: [batch.n_logits()][n_vocab], rows in batch order. Throws StatesLost (the batch
  // did not run; every slot is empty, at position 0; snapshots and held states are gone)
  // once when the runner lost its slots' states, other herd::Errors for a batch that failed.
  virtual void forward(const Batch& batch, std::vector<float>& logits) = 0;
  // The model file this process holds (for the tokenizer and chat template).
  virtual const gguf::File& file() const = 0;
  virtual const ModelInfo& info() const = 0;
  // How the model runs, for timing summaries: "2 threads, avx512 kernels", ...
  virtual std::string describe() const = 0;

  // What the runner is and holds (runner_status.h): callers read it, never the runner's type.
  // Safe from any thread. The default (a test's stand-in runner) reports the defaults.
  virtual RunnerStatus status() const { return {}; }
  // A pod's figures: per stage and forward()'s seconds since open or reset_stats(), and the
  // planner's prediction for a prompt of `prompt_tokens`. A runner that is one process keeps
  // none (the defaults): no stages, 0 seconds, no prediction (all 0).
  virtual std::vector<StageStats> stage_stats() const { return {}; }
  virtual void reset_stats() {}
  virtual double forward_seconds() const { return 0; }
  virtual Prediction prediction(int64_t prompt_tokens) const {
    static_cast<void>(prompt_tokens);
    return {};
  }
  // The live view of a pod for GET /api/cluster (its schema: cluster_runner.h); null for a
  // runner that is one process (the server draws the one-node view from status()). Safe from
  // any thread.
  virtual nlohmann::json cluster_json() const;

  // Why forward() cannot run now (a pod that lost more nodes than it can spare), or empty.
  // Safe from any thread. A server answers 503 with it.
  virtual std::string unavailable() const { return {}; }

  // Models with linear-attention layers (ArchSpec::delta_net) keep a recurrent state per
  // slot that cannot be cut back to a shorter prefix: a batch must continue a slot where it
  // stands or start it again at position 0. To reuse a prefix, the runner keeps snapshots of
  // a slot's states at checkpoints the caller chooses.
  bool recurrent() const { return !state_cuts_back(*info().arch); }
  // Keeps a snapshot of slot `seq`, which has absorbed exactly `pos` positions (a few per
  // slot; the oldest go first). A runner without snapshots (the default) keeps none.
  virtual void save_state(int32_t seq, int64_t pos) {
    static_cast<void>(seq);
    static_cast<void>(pos);
  }
  // Restores the latest snapshot of slot `seq` at a position <= at_most, forgets the slot's
  // snapshots beyond it, and returns its position: the slot continues there. 0: none (the
  // slot starts again at position 0).
  virtual int64_t restore_state(int32_t seq, int64_t at_most) {
    static_cast<void>(seq);
    static_cast<void>(at_most);
    return 0;
  }
  // Speculative decoding on such a model: hold_state keeps a copy of slot `seq`'s states as
  // they stand (one per slot) before a forward that checks a draft, and return_to_held_state
  // puts it back when the check refused part of the draft (the kept tokens then run again).
  // A runner that cannot (the default) is not given drafts for a recurrent model.
  virtual bool holds_states() const { return false; }
  virtual void hold_state(int32_t seq) {
    static_cast<void>(seq);
    throw Error("engine", "this runner cannot hold a slot's recurrent state");
  }
  virtual void return_to_held_state(int32_t seq) {
    static_cast<void>(seq);
    throw Error("engine", "this runner cannot hold a slot's recurrent state");
  }

  // Multi-token prediction (mtp_head.h): the NextN blocks of the model the runner drafts
  // with; 0: none (the model has none, or its head is not loaded: LocalOptions::mtp).
  virtual int64_t mtp_layers() const { return 0; }
  // Greedy drafts of up to k tokens per slot from the MTP head, started from rows of the last
  // forward() (whose hidden states the runner keeps, every row's, until the next one).
  // Start with every position of a slot that the head has not seen (a prompt's from the first
  // token, a verified draft's kept rows), in position order; drafts: one per slot, in the
  // order of their first row.
  // Throws herd::Error when mtp_layers() is 0 or a row is not one of the last forward's.
  virtual void mtp_draft(std::span<const MtpStart> starts, int k, std::vector<MtpDraft>& drafts) {
    static_cast<void>(starts);
    static_cast<void>(k);
    static_cast<void>(drafts);
    throw Error("engine", "this runner has no MTP head");
  }
};

struct LocalOptions {
  int threads = 0;    // 0: all cores
  int64_t n_ctx = 0;  // 0: the model's context length, capped at kDefaultMaxCtx
  int64_t n_seq = 1;
  kernels::Isa isa_limit = kernels::Isa::kAvx512;
  int64_t mla_decompress_min_tokens = -1;  // ShardOptions'
  // --device: auto (a GPU that can run the model, else the CPU), cpu, vulkan, vulkan:N.
  std::string device = "cpu";
  UploadProgress upload_progress;  // ShardOptions'
  // MoE on a device: "cpu" keeps the routed experts on the CPU and the rest on the device
  // (cpu_experts.h); "auto" does so when the model outgrows the device's memory; "device".
  std::string experts = "auto";
  // Loads the model's MTP head (mtp_layers(), mtp_draft()) where the file has NextN blocks and
  // the model runs on the CPU.
  bool mtp = false;
  // A model on a device: its first N layers there, the rest (and the head) on the CPU, as a
  // pipeline of two stages in this process. -1: every layer, or as many as fit when the
  // model outgrows the device (a dense model; an MoE model keeps its experts on the CPU
  // instead).
  int64_t device_layers = -1;
};
constexpr int64_t kDefaultMaxCtx = 4096;

// The one-stage plan: this process holds the whole model, as one rank (rank.h).
class LocalRunner : public ModelRunner {
 public:
  // Maps the file, checks the model and loads it. Throws herd::Error naming the problem.
  static std::unique_ptr<LocalRunner> open(const std::string& path, const LocalOptions& options);

  const HParams& hparams() const override { return rank_->shard().hparams(); }
  int64_t n_ctx() const override { return rank_->shard().n_ctx(); }
  int64_t n_seq() const override { return rank_->shard().n_seq(); }
  void forward(const Batch& batch, std::vector<float>& logits) override;
  void save_state(int32_t seq, int64_t pos) override;
  int64_t restore_state(int32_t seq, int64_t at_most) override;
  // Only a model in one piece: the later layers of a model split over a device and the CPU
  // (--device-layers) hold states of their own that hold_state does not copy.
  bool holds_states() const override { return rank_->cpu_stage() == nullptr; }
  void hold_state(int32_t seq) override;
  void return_to_held_state(int32_t seq) override;

  const gguf::File& file() const override { return file_; }
  const ModelInfo& info() const override { return info_; }
  std::string describe() const override;
  RunnerStatus status() const override;  // its threads and ISA are read here
  const Shard& shard() const { return rank_->shard(); }
  // The CPU rank of the routed experts when they stay off the device, or null.
  const CpuExperts* cpu_experts() const { return rank_->cpu_experts(); }
  // Why --device auto runs on the CPU though the machine has a GPU ("" otherwise): a line for
  // the user.
  const std::string& device_note() const { return device_note_; }

  int64_t mtp_layers() const override;
  void mtp_draft(std::span<const MtpStart> starts, int k, std::vector<MtpDraft>& drafts) override;

 private:
  LocalRunner(gguf::File file, ModelInfo info, kernels::Isa isa);

  // The rank points into the file's mapping: declared after it, so destroyed before it.
  gguf::File file_;
  ModelInfo info_;
  std::unique_ptr<Rank> rank_;
  kernels::Isa isa_;
  std::string device_note_;
  // Per slot, its snapshots in the order taken (at most kSnapshotsPerSlot).
  std::vector<std::vector<RecurrentSnapshot>> snapshots_;
  static constexpr size_t kSnapshotsPerSlot = 4;
  std::vector<RecurrentSnapshot> held_;  // per slot: hold_state's copy
  std::unique_ptr<MtpHead> mtp_;         // LocalOptions::mtp; reads the file: destroyed before it
  std::vector<MtpInput> mtp_inputs_;
  Batch mtp_last_;  // the last forward's slots and positions (mtp_draft checks its starts)
};

}  // namespace herd::engine
