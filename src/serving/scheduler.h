// Scheduler: the policy of the chat engine's iterations (issue 25 item 1; DESIGN.md section
// 8), separate from the model so it can be tested with fake requests and exact block ids.
//
// A request is a SequenceGroup: its n sequences (choices) share the prompt. Until the
// prompt's last token has run, only the first sequence exists in the KV pool; the engine
// then forks it into the others (fork_group) and every sequence decodes on its own.
//
// A sequence's `tokens` are its prompt and the output accepted so far; its pool request
// knows how many have their KV (num_computed). What is left to compute is a prefill chunk
// (a new request, or one preempted and readmitted) or, once decoding, the one token sampled
// last. Each iteration (schedule()) hands out the token budget:
//   1. running groups, oldest first: every unfinished sequence's remaining tokens (a decode
//      step is one token; a chunked prefill takes what the budget leaves). When the pool
//      cannot hold them, the newest running group is preempted: its blocks are freed
//      (their full blocks stay in the prefix cache) and it goes back to the head of the
//      waiting queue, to be recomputed from its tokens when it is readmitted;
//   2. waiting groups, first come first served, while fewer than max_running run and the
//      budget lasts: the prefix cache is looked up, and the first chunk allocated. A group
//      that does not fit waits (and the ones behind it: no overtaking), without preempting.
// The plan's rows say which tokens of which sequence run, and whether the row wants logits
// (its chunk reaches the sequence's last token). A decoding sequence with draft tokens
// (speculative decoding) gets a row of its last token and as many drafts as the budget
// leaves, all allocated; the engine verifies them, commits what was accepted and rolls
// the rest back (KvPool::rollback). After the forward, the engine commits each row
// (KvPool::commit), appends sampled tokens (append_token), and finishes groups.
//
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "serving/kv_pool.h"

namespace parley {

struct SchedulerOptions {
  int64_t max_batch_tokens = 8192;  // tokens per iteration (`--max-batch-tokens`)
  int max_running = 8;              // requests running at once (`--max-running`; 1: serial)
  // Largest prefill chunk of one sequence per iteration; bounds the activations' memory.
  int64_t prefill_chunk = 8192;
};

struct Sequence {
  KvRequestId id = 0;           // its pool request (open while the group runs)
  std::vector<int32_t> tokens;  // prompt + accepted output
  bool finished = false;
  // Speculative decoding: tokens proposed after `tokens` for the next iteration (the
  // engine sets them before schedule(); a decode row takes as many as the budget allows).
  std::vector<int32_t> draft;
};

struct SequenceGroup {
  uint64_t arrival = 0;  // set by add(): preemption takes the newest
  std::string ns;        // the prefix cache's namespace (cache_salt)
  int64_t prompt_len = 0;
  int n = 1;                   // sequences once forked
  std::vector<Sequence> seqs;  // seqs[0] only until fork_group; then n
  int64_t cached_tokens = -1;  // prompt tokens the first admission found cached (-1: not yet)
  int preemptions = 0;         // times this group was preempted
  void* user = nullptr;        // the engine's request
  bool forked() const { return int(seqs.size()) == n; }

  // Scheduler state.
  bool running = false;
};

struct ScheduledRow {
  SequenceGroup* group = nullptr;
  int seq = 0;          // index in group->seqs
  int64_t start = 0;    // first token of the chunk (its position)
  int64_t length = 0;   // tokens in the chunk
  bool logits = false;  // the chunk ends at the sequence's last token
  bool decode = false;  // one token of a sequence that was already decoding
  // Of a decode row: its draft tokens (length = 1 + drafts), verified after the forward.
  int64_t drafts = 0;
};

struct SchedulePlan {
  std::vector<ScheduledRow> rows;  // decode rows first, then prefill rows
  std::vector<SequenceGroup*> preempted;
  int64_t tokens = 0;
  bool empty() const { return rows.empty(); }
};

struct SchedulerStats {
  int64_t waiting = 0;
  int64_t running = 0;
  uint64_t iterations = 0;
  uint64_t preemptions = 0;
  uint64_t scheduled_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(KvPool& pool, SchedulerOptions options);

  // A new request, at the back of the waiting queue. Its seqs[0] carries the prompt; its
  // sequence ids are unique among open pool requests (the caller's numbering).
  void add(SequenceGroup* group);
  // One iteration's rows (empty when nothing can run).
  SchedulePlan schedule();
  // After the prompt's logits: the group's other sequences open as copies of the first.
  void fork_group(SequenceGroup* group, KvRequestId first_new_id);
  // A token sampled for a sequence: it joins its tokens (and its pool request's).
  void append_token(SequenceGroup* group, int seq, int32_t token);
  // A sequence that ended (its group may go on): its blocks are freed now.
  void finish_sequence(SequenceGroup* group, int seq);
  // The group leaves (done or cancelled): its blocks are freed, waiting or running.
  void remove(SequenceGroup* group);

  bool idle() const { return waiting_.empty() && running_.empty(); }
  const std::deque<SequenceGroup*>& waiting() const { return waiting_; }
  const std::vector<SequenceGroup*>& running() const { return running_; }
  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  // Tokens of sequence s still to compute (0 when it is finished).
  int64_t remaining(const SequenceGroup& g, const Sequence& s) const;
  bool admit(SequenceGroup* g, int64_t& budget, SchedulePlan& plan);
  // Back to the head of the waiting queue, blocks freed, its rows out of the plan; returns
  // the tokens those rows had taken from the budget.
  int64_t preempt(SequenceGroup* g, SchedulePlan& plan);
  void release(SequenceGroup* g);  // every open sequence's pool request

  KvPool& pool_;
  SchedulerOptions options_;
  std::deque<SequenceGroup*> waiting_;
  std::vector<SequenceGroup*> running_;  // in admission order (the newest last)
  uint64_t next_arrival_ = 0;
  uint64_t iterations_ = 0, preemptions_ = 0, scheduled_tokens_ = 0;
};

}  // namespace parley
