// ThreadPool: a fixed set of worker threads and a blocking parallel_for. CPU ops split
// their outer loop over cpu_threads(); its size is set once at start-up (set_cpu_threads).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace parley {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }  // workers + the calling thread

  // Runs fn(begin, end) over chunks covering [0, n), at least `grain` items per chunk,
  // on the workers and the calling thread; returns when all chunks are done. The first
  // exception thrown by a chunk is rethrown here. Calls from inside a chunk run inline.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  struct Job;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  Job* job_ = nullptr;
  uint64_t generation_ = 0;
  int active_ = 0;  // workers inside the current job
  bool stop_ = false;
  std::mutex run_mu_;  // one parallel_for at a time
};

// The process-wide pool CPU ops use. Defaults to std::thread::hardware_concurrency().
ThreadPool& cpu_threads();
// Replaces the pool; call at start-up, before any op runs.
void set_cpu_threads(int n_threads);

}  // namespace parley
