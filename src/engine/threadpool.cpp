#include "engine/threadpool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>

namespace parley {

namespace {
thread_local bool t_inside_pool = false;
}

struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n, chunk, n_chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::exception_ptr error;
  std::mutex error_mu;

  // Takes chunks until none are left; returns when this thread has no more to do.
  void run() {
    for (;;) {
      const int64_t c = next.fetch_add(1);
      if (c >= n_chunks) return;
      const int64_t b = c * chunk, e = std::min(n, b + chunk);
      try {
        (*fn)(b, e);
      } catch (...) {
        std::lock_guard lock(error_mu);
        if (!error) error = std::current_exception();
      }
      done.fetch_add(1);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) {
  const int workers = std::max(0, n_threads - 1);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
  t_inside_pool = true;
  uint64_t seen = 0;
  for (;;) {
    Job* job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || (job_ && generation_ != seen); });
      if (stop_) return;
      seen = generation_;
      job = job_;
      ++active_;  // the caller waits for active_ == 0 before the job leaves its stack
    }
    job->run();
    {
      std::lock_guard lock(mu_);
      --active_;
    }
    done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = std::max<int64_t>(1, n / grain);
  const int64_t n_chunks_wanted = std::min<int64_t>(max_chunks, int64_t(size()) * 4);
  if (workers_.empty() || n_chunks_wanted <= 1 || t_inside_pool) {
    fn(0, n);
    return;
  }
  std::lock_guard run_lock(run_mu_);
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunk = (n + n_chunks_wanted - 1) / n_chunks_wanted;
  job.n_chunks = (n + job.chunk - 1) / job.chunk;
  {
    std::lock_guard lock(mu_);
    job_ = &job;
    ++generation_;
  }
  cv_.notify_all();
  t_inside_pool = true;
  job.run();
  t_inside_pool = false;
  {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return job.done.load() == job.n_chunks && active_ == 0; });
    job_ = nullptr;
  }
  if (job.error) std::rethrow_exception(job.error);
}

namespace {
std::unique_ptr<ThreadPool>& global_pool() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
std::mutex g_pool_mu;
}  // namespace

ThreadPool& cpu_threads() {
  std::lock_guard lock(g_pool_mu);
  auto& p = global_pool();
  if (!p) p = std::make_unique<ThreadPool>(int(std::max(1u, std::thread::hardware_concurrency())));
  return *p;
}

void set_cpu_threads(int n_threads) {
  std::lock_guard lock(g_pool_mu);
  global_pool() = std::make_unique<ThreadPool>(std::max(1, n_threads));
}

}  // namespace parley
