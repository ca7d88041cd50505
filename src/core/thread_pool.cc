// Persistent worker threads; tasks claimed from an atomic counter; spin-then-sleep wake-up;
// ParallelFor's shares claimed piece by piece, owners from the front, helpers from the back.
#include "core/thread_pool.h"

#include <algorithm>

#include "core/check.h"

namespace cohort {
namespace {
// Iterations a worker spins looking for new work before it sleeps on the condition
// variable. Long enough to bridge the gap between two matmuls of one forward pass.
constexpr int kSpinIterations = 1 << 16;
// ParallelFor's pieces per share: enough that a thread that is descheduled for a while
// leaves only a small part of its share to the others, few enough that claiming costs nothing.
constexpr int64_t kPiecesPerShare = 8;

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

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads), shares_(std::make_unique<Share[]>(static_cast<size_t>(n_threads_))) {
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
  const int parts = static_cast<int>(n < n_threads_ ? n : n_threads_);
  if (parts <= 1 || n > kMaxShareIndex) {
    fn(0, n);
    return;
  }
  for (int p = 0; p < parts; ++p) {
    int64_t begin, end;
    SplitRange(n, p, parts, &begin, &end);
    shares_[p].range.store(static_cast<uint64_t>(begin) << 32 | static_cast<uint64_t>(end), std::memory_order_relaxed);
    shares_[p].piece = (end - begin + kPiecesPerShare - 1) / kPiecesPerShare;
  }
  // One captured reference fits std::function's inline buffer: no allocation per call.
  struct Loop {
    const std::function<void(int64_t, int64_t)>* fn;
    Share* shares;
  } loop{&fn, shares_.get()};
  RunTasks([&loop](int task, int n_tasks) {
    int64_t begin, end;
    // The task's own share from the front, one stream through memory, ...
    while (loop.shares[task].Claim(/*from_front=*/true, &begin, &end)) (*loop.fn)(begin, end);
    // ... then what is left of the others' from their backs, away from their owners.
    for (int k = 1; k < n_tasks; ++k) {
      Share& other = loop.shares[(task + k) % n_tasks];
      while (other.Claim(/*from_front=*/false, &begin, &end)) (*loop.fn)(begin, end);
    }
  }, parts);
}

bool ThreadPool::Share::Claim(bool from_front, int64_t* begin, int64_t* end) {
  uint64_t r = range.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t front = static_cast<int64_t>(r >> 32), back = static_cast<int64_t>(r & 0xffffffffu);
    if (front >= back) return false;
    const int64_t cut = from_front ? std::min(back, front + piece) : std::max(front, back - piece);
    const uint64_t claimed = from_front ? static_cast<uint64_t>(cut) << 32 | static_cast<uint64_t>(back)
                                        : static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(cut);
    if (range.compare_exchange_weak(r, claimed, std::memory_order_relaxed)) {
      *begin = from_front ? front : cut;
      *end = from_front ? cut : back;
      return true;
    }
  }
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

int ThreadPool::DefaultThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace cohort
