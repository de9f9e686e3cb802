#include "serving/mask_prefetch.h"

#include <algorithm>

namespace parley {

MaskPrefetch::MaskPrefetch(int threads)
    : pool_(std::max(1, threads)), thread_([this] { loop(); }) {}

MaskPrefetch::~MaskPrefetch() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskPrefetch::start(std::vector<TokenConstraint*> constraints) {
  wait();
  if (constraints.empty()) return;
  {
    std::lock_guard lock(mu_);
    jobs_ = std::move(constraints);
    pending_ = true;
  }
  cv_.notify_all();
}

void MaskPrefetch::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !pending_; });
}

void MaskPrefetch::loop() {
  for (;;) {
    std::vector<TokenConstraint*> jobs;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || pending_; });
      if (stop_) return;
      jobs.swap(jobs_);
    }
    pool_.parallel_for(int64_t(jobs.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        try {
          jobs[size_t(i)]->allowed();
        } catch (...) {  // the sampler meets it again and reports it with its request
        }
      }
    });
    {
      std::lock_guard lock(mu_);
      pending_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace parley
