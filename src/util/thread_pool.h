// ThreadPool: a fixed set of workers for data-parallel loops (matmul rows, heads, tokens).
// run(n, fn) calls fn(task, worker) for task in [0, n) across the workers and the calling
// thread, and returns when all are done. Tasks are claimed dynamically, so a worker the OS
// has not scheduled (other processes share the cores) delays nothing: the caller takes its
// tasks. Between calls the workers spin for a short while (a forward pass issues hundreds
// of loops back to back, and a wake-up through the kernel costs more than a small loop),
// then sleep on a condition variable, so an idle pool uses no CPU between requests.
// Thread-safety: run() must not be called concurrently from several threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "util/function_ref.h"

namespace herd {

class ThreadPool {
 public:
  // n_threads counts the calling thread: n_threads - 1 workers are started. 0 means
  // default_thread_count() (cpu_info.h): the performance cores, or all cores when the OS
  // does not tell kinds apart.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task, thread_index) for every task in [0, n_tasks); thread_index < size().
  // Tasks are handed out dynamically in order. Exceptions thrown by fn are rethrown here
  // (the first one; the remaining tasks still run).
  void run(int64_t n_tasks, FunctionRef<void(int64_t task, int thread)> fn);

  // Convenience: splits [0, n) into one contiguous range per thread:
  // fn(begin, end, thread_index). Ranges are as even as possible.
  void parallel_for(int64_t n, FunctionRef<void(int64_t begin, int64_t end, int thread)> fn);

 private:
  void worker_loop(int index);
  // Runs tasks of generation `gen` until none is left; returns at once for a stale one.
  void work(int thread, uint32_t gen);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
  // The current job. Tasks are claimed from ticket_ = (generation << 32) | next task, so a
  // worker still in an old generation can never claim a task of a newer one: run() first
  // closes the ticket under the new generation, then publishes the job (all sequentially
  // consistent, so a worker that sees the new job's size also sees the closed ticket).
  std::atomic<const FunctionRef<void(int64_t, int)>*> job_{nullptr};
  std::atomic<int64_t> n_tasks_{0};
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> done_{0};  // tasks of the current generation that have finished
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

}  // namespace herd
