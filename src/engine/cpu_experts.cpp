#include "engine/cpu_experts.h"

namespace herd::engine {

TensorSlice device_slice_without_experts() {
  TensorSlice slice;
  slice.experts.emplace();  // none
  return slice;
}

TensorSlice cpu_slice_of_experts() {
  TensorSlice slice;
  slice.head_end = slice.kv_head_end = 0;  // no heads: its attention adds zeros
  slice.vocab_end = 0;                     // no logits
  slice.dense_ffn = false;                 // dense layers and shared experts: the device's
  return slice;                            // every routed expert (experts: all)
}

CpuExperts::CpuExperts(Shard shard, ThreadPool& pool)
    : shard_(std::move(shard)), pool_(pool), thread_([this] { run(); }) {}

CpuExperts::~CpuExperts() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void CpuExperts::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || batch_ != nullptr; });
    if (stop_) return;
    const Batch* batch = batch_;
    const float* input = input_;
    lock.unlock();
    std::exception_ptr error;
    bool first = false;
    try {
      shard_.forward(*batch, input, unused_, pool_, &cpu_rank_);
    } catch (...) {
      error = std::current_exception();
      first = sum_.abort();  // the device rank must not wait for this one's sums
    }
    lock.lock();
    batch_ = nullptr;
    error_ = error;
    cpu_failed_first_ = first;
    finished_ = true;
    done_.notify_one();
  }
}

void CpuExperts::forward(Shard& device, const Batch& batch, const float* input,
                         std::vector<float>& output, ThreadPool& device_pool) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch_ = &batch;
    input_ = input;
    finished_ = false;
  }
  wake_.notify_one();
  // Both ranks check the batch the same way before their first sum, so a bad batch fails
  // both; a rank that fails between sums (a lost device) aborts the sum, so that the other
  // throws instead of waiting for it, and the first failure is the one reported.
  std::exception_ptr mine;
  try {
    device.forward(batch, input, output, device_pool, &device_rank_);
  } catch (...) {
    mine = std::current_exception();
    sum_.abort();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return finished_; });
  if (sum_.aborted()) sum_.reset();  // both ranks are out of it
  if (error_ && (cpu_failed_first_ || !mine)) std::rethrow_exception(error_);
  if (mine) std::rethrow_exception(mine);
}

}  // namespace herd::engine
