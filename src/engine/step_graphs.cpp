// StepGraphs: capture and replay of repeated steps (step_graphs.h).
#include "engine/step_graphs.h"

#include "engine/env.h"

namespace parley {

bool StepGraphs::enabled() { return env_switch_on("PARLEY_CUDA_GRAPHS"); }

void StepGraphs::evict_one() {
  auto oldest = entries_.begin();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->second.last_use < oldest->second.last_use) oldest = it;
  entries_.erase(oldest);
}

void StepGraphs::run(const Key& key, const std::function<void()>& body) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= capacity_) evict_one();
    it = entries_.emplace(key, Entry{}).first;
  }
  Entry& e = it->second;
  e.last_use = ++clock_;
  const uint64_t generation = cuda::scratch_generation();
  if (e.graph && e.generation != generation) e.graph.reset();
  if (e.graph) {
    cuda::launch(*e.graph);
    ++replays_;
    return;
  }
  // The first run of a key (or the first since the scratch moved) is eager: it sizes what
  // the step needs, so that the capture allocates nothing.
  if (e.failed || e.eager_runs == 0) {
    ++e.eager_runs;
    body();
    return;
  }
  cuda::begin_capture(programmatic_);
  try {
    body();
    e.graph = cuda::end_capture();
  } catch (...) {
    cuda::abort_capture();
    e.failed = true;
    e.graph.reset();
  }
  // The scratch moved while capturing: the graph would read the old buffer.
  if (e.graph && cuda::scratch_generation() != generation) {
    e.graph.reset();
    e.eager_runs = 0;
  }
  if (!e.graph) {  // nothing ran: run the step eagerly
    body();
    return;
  }
  e.generation = generation;
  ++captures_;
  cuda::launch(*e.graph);
}

}  // namespace parley
