// StepGraphs: CUDA graphs of a repeated step (a chat model's decode step), kept by a key that
// fixes the step's shapes and pointers. The first time a key is seen the step runs eagerly
// (growing the pools, the scratch and the GEMM plans it needs); the second time it is
// captured and launched; later it is replayed with one launch instead of a few hundred.
//
// The step's body must read its inputs from, and write its outputs to, buffers that never
// move while the graph lives (the caller uploads the inputs before run()); its intermediates
// may come from a Pool, which never returns blocks to the system, since all work is ordered
// on the backend's one stream. Graphs are dropped when the backend's scratch buffer moves
// (cuda::scratch_generation()) and by clear() (the caller's buffers moved). A capture that
// fails (an op that cannot be captured) marks its key: that key runs eagerly from then on.
// At most `capacity` graphs are kept; the least recently used goes first.
// PARLEY_CUDA_GRAPHS=0 turns graphs off (enabled()).
// Limit: the capture records whatever any thread queues on the stream meanwhile; callers on
// a shared GPU hold cuda::exclusive() (device.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "engine/device.h"

namespace parley {

class StepGraphs {
 public:
  using Key = std::array<int64_t, 3>;

  explicit StepGraphs(size_t capacity = 64, bool programmatic = true)
      : capacity_(capacity), programmatic_(programmatic) {}
  static bool enabled();  // the PARLEY_CUDA_GRAPHS switch

  // Queues `body` on the CUDA stream through the graph kept under `key` (see above).
  void run(const Key& key, const std::function<void()>& body);
  void clear() { entries_.clear(); }

  size_t size() const { return entries_.size(); }
  uint64_t captures() const { return captures_; }
  uint64_t replays() const { return replays_; }

 private:
  struct Entry {
    std::shared_ptr<cuda::Graph> graph;
    uint64_t generation = 0;  // scratch generation the graph was captured in
    uint64_t last_use = 0;
    int eager_runs = 0;
    bool failed = false;
  };
  void evict_one();

  size_t capacity_;
  bool programmatic_;
  std::map<Key, Entry> entries_;
  uint64_t clock_ = 0, captures_ = 0, replays_ = 0;
};

}  // namespace parley
