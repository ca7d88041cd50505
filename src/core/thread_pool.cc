// Persistent worker threads with a spin-then-sleep wake-up.
#include "core/thread_pool.h"

#include "core/check.h"

namespace cohort {
namespace {
// Iterations a worker spins looking for new work before it sleeps on the condition
// variable. Long enough to bridge the gap between two matmuls of one forward pass.
constexpr int kSpinIterations = 1 << 16;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelRun(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    COHORT_CHECK_EQ(pending_.load(), 0);
    job_ = &fn;
    pending_.store(n_threads_ - 1);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  fn(0, n_threads_);
  // Workers finish within the same job; spin, then yield the core to them.
  int spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int parts = n < n_threads_ ? static_cast<int>(n) : n_threads_;
  if (parts == 1) {
    fn(0, n);
    return;
  }
  // One captured reference fits std::function's inline buffer: no allocation per call.
  struct Loop {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n;
    int parts;
  } loop{&fn, n, parts};
  ParallelRun([&loop](int index, int) {
    if (index >= loop.parts) return;
    int64_t begin, end;
    SplitRange(loop.n, index, loop.parts, &begin, &end);
    if (begin < end) (*loop.fn)(begin, end);
  });
}

void ThreadPool::WorkerLoop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    uint64_t current = generation_.load(std::memory_order_acquire);
    while (current == seen && spins < kSpinIterations) {
      CpuRelax();
      ++spins;
      current = generation_.load(std::memory_order_acquire);
    }
    if (current == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      current = generation_.load();
    }
    seen = current;
    if (stop_.load()) return;
    (*job_)(thread_index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace cohort
