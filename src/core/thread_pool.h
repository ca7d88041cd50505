// A persistent pool of worker threads for data-parallel loops. Threads are created once. A
// call splits its work into tasks that whichever threads are running claim one at a time
// (the caller takes part): on a busy machine, where a worker may not be scheduled for a
// while, the running threads do its share instead of waiting for it. Idle workers spin
// briefly before sleeping, so back-to-back calls on the decode path pay no futex wake-up.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cohort {

class ThreadPool {
 public:
  // The cores this process may run on (at least 1): the default thread count.
  static int DefaultThreads();
  // n_threads counts the calling thread: ThreadPool(1) runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(index, size()) once for each index in [0, size()) and waits for all. Each index
  // runs on one thread (so per-index scratch needs no locking), but not necessarily on a
  // thread of its own: a running thread may take the index of one that is not scheduled.
  // fn splits the work itself; see SplitRange. Not reentrant: one call at a time.
  void ParallelRun(const std::function<void(int index, int n_parts)>& fn);

  // Calls fn(begin, end) on contiguous pieces of [0, n) that together cover it once. Each
  // thread takes one contiguous share of [0, n) and walks it from the front, so that a matmul
  // reads its weights as one stream per thread (the hardware prefetcher's best case:
  // interleaved chunks cost a fifth of the read bandwidth here); a thread that is done, or
  // runs in place of one that is not scheduled, then takes pieces from the other shares'
  // backs.
  void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

 private:
  // Runs fn(task, n_tasks) for every task in [0, n_tasks), claimed dynamically.
  void RunTasks(const std::function<void(int, int)>& fn, int n_tasks);
  void ClaimTasks();
  void WorkerLoop();

  // One thread's share of a ParallelFor: [front, back) not yet claimed, packed in one word
  // (front in the high 32 bits), claimed `piece` indices at a time from either end.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
    int64_t piece = 1;
    bool Claim(bool from_front, int64_t* begin, int64_t* end);
  };
  // Larger ranges do not fit a Share's halves; ParallelFor runs them inline (none comes near).
  static constexpr int64_t kMaxShareIndex = 0x7fffffff;

  // state_: generation (high 32 bits) | kOpen | number of workers inside the current job.
  // A worker joins only while the job is open, in one atomic step, so the caller can close
  // the job and wait for the joined workers to leave before the job's fn goes out of scope.
  static constexpr uint64_t kOpen = 1ull << 31;
  static constexpr uint64_t kActiveMask = kOpen - 1;

  int n_threads_;
  std::unique_ptr<Share[]> shares_;  // one per thread, for ParallelFor
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  int job_tasks_ = 0;
  std::atomic<int> next_task_{0};
  std::atomic<int> done_tasks_{0};
  std::atomic<uint64_t> state_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
};

// The [begin, end) share of n items for part `index` of `parts`, as even as possible.
inline void SplitRange(int64_t n, int index, int parts, int64_t* begin, int64_t* end) {
  const int64_t base = n / parts;
  const int64_t extra = n % parts;
  *begin = index * base + (index < extra ? index : extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}

}  // namespace cohort
