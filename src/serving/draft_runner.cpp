#include "serving/draft_runner.h"

#include <chrono>
#include <cmath>

#include "engine/error.h"
#include "sampling/philox.h"
#include "sampling/sampling_params.h"

namespace parley {

namespace {
// The lowest id among the row's largest logits.
int32_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return int32_t(best);
}
// A draw from softmax(row / t) by inverse CDF at u (in double); q gets the probabilities.
int32_t draw(const float* row, int64_t n, float t, double u, float* q) {
  const int32_t top = argmax(row, n);
  const double m = row[top];
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += std::exp((double(row[i]) - m) / t);
  const double target = u * total;
  double acc = 0;
  int32_t pick = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double w = std::exp((double(row[i]) - m) / t);
    q[i] = float(w / total);
    acc += w;
    if (pick < 0 && acc > target) pick = int32_t(i);
  }
  return pick < 0 ? top : pick;
}

// The draft lane of a request's random streams (RowSampling's own lanes are below it).
constexpr uint64_t kDraftLane = uint64_t(8) << 56;

}  // namespace

DraftRunner::DraftRunner(const LlmModel& draft, int64_t target_vocab, int64_t n_blocks)
    : model_(draft),
      cache_(draft.config(), n_blocks, draft.device(), draft.dtype()),
      pool_(cache_),
      scratch_(draft.device()) {
  check_arg(draft.config().vocab_size == target_vocab,
            "[draft] the draft model's vocabulary (" + std::to_string(draft.config().vocab_size) +
                ") is not the target's (" + std::to_string(target_vocab) +
                "): a draft must share the target's tokenizer");
}

void DraftRunner::release(KvRequestId id) {
  pool_.free(id);
  known_.erase(id);
}

void DraftRunner::propose(std::span<const Job> jobs) {
  const auto t0 = std::chrono::steady_clock::now();
  // Catch-up rows: what each sequence's draft KV lacks, with room for its drafts.
  std::vector<const Job*> live;
  batch_.rows.clear();
  for (const Job& j : jobs) {
    if (j.k <= 0 || j.tokens.empty()) continue;
    if (!pool_.has_request(j.id)) {
      pool_.lookup_prefix(j.id, j.tokens);
      known_[j.id] = j.tokens.size();
    } else {
      size_t& known = known_[j.id];
      pool_.append_tokens(j.id, j.tokens.subspan(known));
      known = j.tokens.size();
    }
    const int64_t done = pool_.num_computed(j.id);
    const int64_t len = int64_t(j.tokens.size()) - done;
    if (len <= 0 || !pool_.allocate(j.id, len + j.k - 1)) continue;  // no room: no drafts
    if (j.probs) j.probs->clear();
    live.push_back(&j);
  }
  // Tables are read after every allocation (a row's span stays valid through the forward).
  for (const Job* j : live) {
    const int64_t done = pool_.num_computed(j->id);
    batch_.rows.push_back(
        {j->tokens.subspan(size_t(done)), int32_t(done), pool_.block_table(j->id), true, false});
  }
  int max_k = 0;
  for (const Job* j : live) max_k = std::max(max_k, j->k);
  const int64_t vocab = model_.config().vocab_size;
  for (int step = 0; step < max_k && !batch_.rows.empty(); ++step) {
    model_.forward(batch_, cache_, logits_, scratch_);
    ++forwards_;
    // Each row's draft; the rows of sequences that want more go on, one token each.
    Batch next;
    size_t r = 0;
    for (const Job* j : live) {
      if (int(j->out->size()) >= j->k) continue;
      if (step == 0) pool_.commit(j->id, int64_t(j->tokens.size()));
      const float* row = logits_.data<float>() + int64_t(r++) * vocab;
      if (j->probs && j->temperature >= kGreedyTemperature) {
        const size_t at = j->probs->size();
        j->probs->resize(at + size_t(vocab));
        const uint64_t position = j->tokens.size() + j->out->size();
        j->out->push_back(draw(row, vocab, j->temperature,
                               philox_uniform(j->seed, j->stream ^ kDraftLane, position),
                               j->probs->data() + at));
      } else {
        j->out->push_back(argmax(row, vocab));
      }
      if (int(j->out->size()) < j->k)
        next.rows.push_back({std::span(&j->out->back(), 1),
                             int32_t(j->tokens.size() + j->out->size() - 1),
                             pool_.block_table(j->id), true, false});
    }
    batch_.rows.swap(next.rows);
  }
  for (const Job* j : live) pool_.rollback(j->id);  // the draft positions
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace parley
