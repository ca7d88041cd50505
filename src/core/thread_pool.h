// A persistent pool of worker threads for data-parallel loops. Threads are created once;
// each ParallelFor wakes them (spinning briefly before sleeping, so back-to-back calls on the
// decode path do not pay a futex wake-up) and the caller takes part in the work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cohort {

class ThreadPool {
 public:
  // n_threads counts the calling thread: ThreadPool(1) runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index, n_threads) once on each of the pool's threads and waits for all.
  // fn splits the work itself; see SplitRange. Not reentrant: one ParallelRun at a time.
  void ParallelRun(const std::function<void(int thread_index, int n_threads)>& fn);

  // Calls fn(begin, end) on contiguous chunks of [0, n) spread over the threads.
  void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

 private:
  void WorkerLoop(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
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
