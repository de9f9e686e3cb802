// MaskPrefetch: the grammar masks of the rows a forward pass is about to sample, computed on
// threads of their own while the forward pass runs. A constrained row's mask depends on its
// grammar state alone, which is known before the forward; TokenConstraint caches masks per
// state, so the sampler afterwards finds the mask ready and only applies it. On CUDA the
// engine's thread spends the forward waiting for the GPU, so the masks cost no wall time
// up to the forward's length; on the CPU the forward uses every core and gains nothing.
#pragma once
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/threadpool.h"
#include "grammar/constraint.h"

namespace parley {

class MaskPrefetch {
 public:
  explicit MaskPrefetch(int threads);  // threads computing masks together (at least 1)
  ~MaskPrefetch();
  MaskPrefetch(const MaskPrefetch&) = delete;
  MaskPrefetch& operator=(const MaskPrefetch&) = delete;

  // Computes each constraint's mask at its current state in the background. Nothing else
  // may touch these constraints until wait() returns. An error (a state no token can
  // continue) is left for the sampler, which meets it again in the row it belongs to.
  void start(std::vector<TokenConstraint*> constraints);
  void wait();  // returns when the last start's masks are done (at once if none started)

 private:
  void loop();
  ThreadPool pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TokenConstraint*> jobs_;
  bool pending_ = false;  // a start not yet finished
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace parley
