// ThreadPool: a fixed set of workers for data-parallel loops (matmul rows, heads, tokens).
// run(n, fn) calls fn(task, worker) for task in [0, n) across the workers and the calling
// thread, and returns when all are done. Between calls the workers spin for a short while
// (a forward pass issues hundreds of loops back to back, and a wake-up through the kernel
// costs more than a small loop), then sleep on a condition variable, so an idle pool uses
// no CPU between requests.
// Thread-safety: run() must not be called concurrently from several threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace herd {

class ThreadPool {
 public:
  // n_threads counts the calling thread: n_threads - 1 workers are started. 0 means all cores.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task, thread_index) for every task in [0, n_tasks); thread_index < size().
  // Tasks are handed out dynamically in order. Exceptions thrown by fn are rethrown here
  // (the first one; the remaining tasks still run).
  void run(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);

  // Convenience: splits [0, n) into one contiguous range per thread:
  // fn(begin, end, thread_index). Ranges are as even as possible.
  void parallel_for(int64_t n,
                    const std::function<void(int64_t begin, int64_t end, int thread)>& fn);

 private:
  void worker_loop(int index);
  void work(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  // The current job; valid while pending_ > 0.
  const std::function<void(int64_t, int)>* job_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> active_{0};  // threads still working on the current job
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

}  // namespace herd
