// Persistent worker threads; tasks claimed from an atomic counter; spin-then-sleep wake-up.
#include "core/thread_pool.h"

#include "core/check.h"

namespace cohort {
namespace {
// Iterations a worker spins looking for new work before it sleeps on the condition
// variable. Long enough to bridge the gap between two matmuls of one forward pass.
constexpr int kSpinIterations = 1 << 16;
// ParallelFor's chunks per thread: enough that a thread that is descheduled for a while
// leaves only a small share to the others, few enough that claiming costs nothing.
constexpr int64_t kChunksPerThread = 8;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins, then yields the core, until done() holds.
template <typename Done>
void WaitUntil(const Done& done) {
  int spins = 0;
  while (!done()) {
    if (++spins < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

uint32_t Generation(uint64_t state) { return static_cast<uint32_t>(state >> 32); }

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelRun(const std::function<void(int, int)>& fn) { RunTasks(fn, n_threads_); }

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t max_tasks = n_threads_ == 1 ? 1 : n_threads_ * kChunksPerThread;
  const int tasks = static_cast<int>(n < max_tasks ? n : max_tasks);
  // One captured reference fits std::function's inline buffer: no allocation per call.
  struct Loop {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n;
  } loop{&fn, n};
  RunTasks([&loop](int task, int n_tasks) {
    int64_t begin, end;
    SplitRange(loop.n, task, n_tasks, &begin, &end);
    if (begin < end) (*loop.fn)(begin, end);
  }, tasks);
}

void ThreadPool::RunTasks(const std::function<void(int, int)>& fn, int n_tasks) {
  if (n_threads_ == 1 || n_tasks <= 1) {
    for (int i = 0; i < n_tasks; ++i) fn(i, n_tasks);
    return;
  }
  COHORT_CHECK_EQ(state_.load() & (kOpen | kActiveMask), 0u);  // not reentrant
  job_ = &fn;
  job_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  done_tasks_.store(0, std::memory_order_relaxed);
  const uint64_t generation = Generation(state_.load()) + 1u;
  state_.store((generation << 32) | kOpen);  // seq_cst: pairs with a sleeper's sleepers_++
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  ClaimTasks();
  WaitUntil([&] { return done_tasks_.load(std::memory_order_acquire) == n_tasks; });
  // Close the job; workers that joined it leave as soon as they find no task left.
  state_.fetch_and(~kOpen);
  WaitUntil([&] { return (state_.load(std::memory_order_acquire) & kActiveMask) == 0; });
  job_ = nullptr;
}

void ThreadPool::ClaimTasks() {
  for (;;) {
    const int task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= job_tasks_) return;
    (*job_)(task, job_tasks_);
    done_tasks_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  for (;;) {
    // Join the next open job of a generation not yet seen, in one CAS (see state_).
    auto try_join = [&]() -> bool {
      uint64_t s = state_.load(std::memory_order_acquire);
      while (Generation(s) != seen) {
        if ((s & kOpen) == 0) {  // missed it: the job closed before this worker came by
          seen = Generation(s);
          return false;
        }
        if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) {
          seen = Generation(s);
          return true;
        }
      }
      return false;
    };
    bool joined = false;
    for (int spins = 0; spins < kSpinIterations && !joined && !stop_.load(std::memory_order_relaxed); ++spins) {
      joined = try_join();
      if (!joined) CpuRelax();
    }
    while (!joined) {
      sleepers_.fetch_add(1);
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] {
          const uint64_t s = state_.load();
          return stop_.load() || (Generation(s) != seen && (s & kOpen) != 0);
        });
      }
      sleepers_.fetch_sub(1);
      if (stop_.load()) return;
      joined = try_join();
    }
    ClaimTasks();
    state_.fetch_sub(1, std::memory_order_acq_rel);  // leave the job
  }
}

}  // namespace cohort
