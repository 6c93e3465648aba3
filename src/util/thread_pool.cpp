#include "util/thread_pool.h"

#include <algorithm>
#include <string>

#include "util/cpu_info.h"
#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HERD_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define HERD_CPU_RELAX() asm volatile("yield")
#else
#define HERD_CPU_RELAX() \
  do {                   \
  } while (0)
#endif

namespace herd {
namespace {

// How long an idle worker spins for the next job before it sleeps: long enough to cover
// the gap between two loops of one forward pass, short enough that an idle pool goes
// quiet at once. After kSpinPauses it yields the core (other processes may need it).
constexpr int kSpinPauses = 4000;
constexpr int kSpinYields = 200;

constexpr uint64_t kClosed = 0xFFFFFFFFu;  // a task index no job reaches

constexpr uint64_t ticket_of(uint32_t gen, uint64_t task) {
  return static_cast<uint64_t>(gen) << 32 | task;
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = default_thread_count();
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::work(int thread, uint32_t gen) {
  for (;;) {
    uint64_t ticket = ticket_.load();
    do {
      if (static_cast<uint32_t>(ticket >> 32) != gen) return;  // a newer job has started
      if (static_cast<int64_t>(ticket & 0xFFFFFFFFu) >= n_tasks_.load()) return;
    } while (!ticket_.compare_exchange_weak(ticket, ticket + 1));
    // The claim succeeded on a ticket of the current generation, so the job is its job.
    const int64_t task = static_cast<int64_t>(ticket & 0xFFFFFFFFu);
    try {
      (*job_.load())(task, thread);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinPauses + kSpinYields; ++spin) {
      if (spin < kSpinPauses) {
        HERD_CPU_RELAX();
      } else {
        std::this_thread::yield();
      }
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    work(index, gen);
  }
}

void ThreadPool::run(int64_t n_tasks, FunctionRef<void(int64_t, int)> fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  HERD_CHECK_MSG(n_tasks < (int64_t{1} << 32), "too many tasks: " + std::to_string(n_tasks));
  const uint32_t gen = generation_.load() + 1;
  // Close the ticket first: from here on no worker can claim a task of the old job, so
  // none can run the new job under the old ticket (see the header).
  ticket_.store(ticket_of(gen, kClosed));
  job_.store(&fn);
  n_tasks_.store(n_tasks);
  done_.store(0);
  error_ = nullptr;
  {
    // Publishing under the mutex pairs with the sleepers' wait predicate.
    std::lock_guard<std::mutex> lock(mutex_);
    ticket_.store(ticket_of(gen, 0));
    generation_.store(gen);
  }
  wake_.notify_all();
  work(0, gen);
  // Every task is claimed; wait for the ones other threads are still running.
  for (int spin = 0; done_.load(std::memory_order_acquire) != n_tasks; ++spin) {
    if (spin < kSpinPauses) {
      HERD_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  job_.store(nullptr);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t, int)> fn) {
  const int64_t parts = std::min<int64_t>(n, n_threads_);
  run(parts,
      [&](int64_t part, int thread) { fn(n * part / parts, n * (part + 1) / parts, thread); });
}

}  // namespace herd
