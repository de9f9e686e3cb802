#include "serving/scheduler.h"

#include <algorithm>

#include "engine/error.h"

namespace parley {

Scheduler::Scheduler(KvPool& pool, SchedulerOptions options) : pool_(pool), options_(options) {
  check_arg(options_.max_batch_tokens >= 1, "[scheduler] max_batch_tokens must be at least 1");
  check_arg(options_.max_running >= 1, "[scheduler] max_running must be at least 1");
  check_arg(options_.prefill_chunk >= 1, "[scheduler] prefill_chunk must be at least 1");
}

void Scheduler::add(SequenceGroup* g) {
  check_arg(g && g->seqs.size() == 1 && !g->seqs[0].tokens.empty() && g->n >= 1,
            "[scheduler] a new request has one sequence with its prompt");
  g->arrival = next_arrival_++;
  g->prompt_len = int64_t(g->seqs[0].tokens.size());
  g->running = false;
  waiting_.push_back(g);
}

int64_t Scheduler::remaining(const SequenceGroup&, const Sequence& s) const {
  if (s.finished) return 0;
  if (!pool_.has_request(s.id)) return int64_t(s.tokens.size());
  return int64_t(s.tokens.size()) - pool_.num_computed(s.id);
}

void Scheduler::release(SequenceGroup* g) {
  for (Sequence& s : g->seqs) pool_.free(s.id);
}

int64_t Scheduler::preempt(SequenceGroup* g, SchedulePlan& plan) {
  release(g);
  std::erase(running_, g);
  g->running = false;
  waiting_.push_front(g);
  int64_t freed = 0;
  std::erase_if(plan.rows, [&](const ScheduledRow& r) {
    if (r.group != g) return false;
    freed += r.length;
    return true;
  });
  plan.tokens -= freed;
  plan.preempted.push_back(g);
  ++g->preemptions;
  ++preemptions_;
  return freed;
}

bool Scheduler::admit(SequenceGroup* g, int64_t& budget, SchedulePlan& plan) {
  std::vector<ScheduledRow> rows;
  int64_t used = 0;
  for (int si = 0; si < int(g->seqs.size()); ++si) {
    Sequence& s = g->seqs[size_t(si)];
    if (s.finished) continue;
    const int64_t cached = pool_.lookup_prefix(s.id, s.tokens, g->ns);
    if (si == 0 && g->cached_tokens < 0) g->cached_tokens = cached;
    const int64_t left = int64_t(s.tokens.size()) - cached;
    const int64_t len = std::min({left, budget - used, options_.prefill_chunk});
    if (!pool_.allocate(s.id, len)) {
      release(g);
      return false;
    }
    if (len > 0) {
      rows.push_back({g, si, cached, len, len == left, false});
      used += len;
    }
  }
  budget -= used;
  plan.tokens += used;
  plan.rows.insert(plan.rows.end(), rows.begin(), rows.end());
  g->running = true;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), g,
                                   [](const SequenceGroup* a, const SequenceGroup* b) {
                                     return a->arrival < b->arrival;
                                   }),
                  g);
  return true;
}

SchedulePlan Scheduler::schedule() {
  SchedulePlan plan;
  int64_t budget = options_.max_batch_tokens;
  // 1. The running groups, oldest first.
  for (size_t gi = 0; gi < running_.size() && budget > 0; ++gi) {
    SequenceGroup* g = running_[gi];
    for (int si = 0; si < int(g->seqs.size()) && budget > 0; ++si) {
      Sequence& s = g->seqs[size_t(si)];
      const int64_t left = remaining(*g, s);
      if (left <= 0) continue;
      const bool decode = left == 1 && int64_t(s.tokens.size()) > g->prompt_len;
      const int64_t want = decode ? left + int64_t(s.draft.size()) : left;
      int64_t len = std::min({want, budget, options_.prefill_chunk});
      bool ok = pool_.allocate(s.id, len);
      if (!ok && len > left) ok = pool_.allocate(s.id, len = left);  // drafts go first
      while (!ok) {
        SequenceGroup* victim = running_.back();  // the newest
        budget += preempt(victim, plan);          // its planned rows give their tokens back
        if (victim == g) break;
        ok = pool_.allocate(s.id, len);
      }
      if (!ok) break;  // g itself went back to waiting (it was the newest)
      const int64_t start = pool_.num_computed(s.id);
      plan.rows.push_back({g, si, start, len, len >= left, decode, decode ? len - 1 : 0});
      plan.tokens += len;
      budget -= len;
    }
  }
  // 2. Waiting groups, in order, while there is room; none in an iteration that preempted.
  while (plan.preempted.empty() && !waiting_.empty() && budget > 0 &&
         int(running_.size()) < options_.max_running) {
    if (!admit(waiting_.front(), budget, plan)) break;
    waiting_.pop_front();
  }
  std::stable_partition(plan.rows.begin(), plan.rows.end(),
                        [](const ScheduledRow& r) { return r.decode; });
  if (!plan.empty()) ++iterations_;
  scheduled_tokens_ += uint64_t(plan.tokens);
  return plan;
}

void Scheduler::fork_group(SequenceGroup* g, KvRequestId first_new_id) {
  check_arg(g->seqs.size() == 1, "[scheduler] a group forks once");
  g->seqs.reserve(size_t(g->n));  // `first` stays valid while the others join
  const Sequence& first = g->seqs[0];
  for (int i = 1; i < g->n; ++i) {
    Sequence s;
    s.id = first_new_id + KvRequestId(i - 1);
    s.tokens = first.tokens;
    pool_.fork(first.id, s.id);
    g->seqs.push_back(std::move(s));
  }
}

void Scheduler::append_token(SequenceGroup* g, int seq, int32_t token) {
  Sequence& s = g->seqs[size_t(seq)];
  s.tokens.push_back(token);
  if (pool_.has_request(s.id)) pool_.append_tokens(s.id, std::span(&token, 1));
}

void Scheduler::finish_sequence(SequenceGroup* g, int seq) {
  Sequence& s = g->seqs[size_t(seq)];
  s.finished = true;
  pool_.free(s.id);
}

void Scheduler::remove(SequenceGroup* g) {
  release(g);
  std::erase(running_, g);
  std::erase(waiting_, g);
  g->running = false;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.waiting = int64_t(waiting_.size());
  s.running = int64_t(running_.size());
  s.iterations = iterations_;
  s.preemptions = preemptions_;
  s.scheduled_tokens = scheduled_tokens_;
  return s;
}

}  // namespace parley
