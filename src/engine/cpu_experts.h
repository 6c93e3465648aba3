// The routed experts of an MoE model on the CPU while the rest runs on a device: the
// expert-parallel stage of two ranks in one process (backend.h). The device shard holds
// attention, norms, dense layers, shared experts and the head (its slice: no routed
// experts); this rank holds every routed expert and nothing else (no heads, no vocabulary,
// TensorSlice::dense_ffn false). Each forward runs both, this one on its own thread, and their
// FFN outputs meet in a shared-memory all-reduce. The placement that runs Kimi-, DeepSeek- and
// GLM-sized models on one PC (ik_llama.cpp's `-ot exps=CPU`), as a plan, not a special path.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/shard.h"
#include "engine/shared_memory_sum.h"

namespace herd::engine {

// The slices of the two ranks.
TensorSlice device_slice_without_experts();
TensorSlice cpu_slice_of_experts();

class CpuExperts {
 public:
  // shard: loaded with cpu_slice_of_experts(); pool: the threads its kernels use (not the
  // caller's while forward() runs it).
  CpuExperts(Shard shard, ThreadPool& pool);
  ~CpuExperts();
  CpuExperts(const CpuExperts&) = delete;
  CpuExperts& operator=(const CpuExperts&) = delete;

  // Runs `device` (the other rank) on the calling thread and this rank on its own, with the
  // same batch and input (Shard::forward's: [n][n_embd] activations from the previous stage,
  // null where the part embeds the tokens); output: the device rank's (logits, or the
  // activations of a part without the head). Rethrows this rank's error.
  void forward(Shard& device, const Batch& batch, const float* input, std::vector<float>& output,
               ThreadPool& device_pool);
  const Shard& shard() const { return shard_; }

 private:
  void run();  // the thread: one batch per request until stopped

  Shard shard_;
  ThreadPool& pool_;
  SharedMemorySum sum_{2};
  SharedMemoryRank device_rank_{sum_, 0}, cpu_rank_{sum_, 1};
  std::vector<float> unused_;  // this rank's empty logits
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const Batch* batch_ = nullptr;  // the request in hand
  const float* input_ = nullptr;  // and its input
  bool finished_ = false, stop_ = false;
  std::exception_ptr error_;
  bool cpu_failed_first_ = false;  // this rank's error aborted the sum (the device's followed)
  std::thread thread_;
};

}  // namespace herd::engine
