// DraftRunner: the draft model of speculative decoding (SpecMethod::draft; issue 27 item 2).
// A smaller chat model with the target's tokenizer guesses each sequence's next k tokens:
// greedily for a greedy request (its argmax, a one-hot draft for the verifier: the output
// is the target's token for token), and for a sampled request drawn from the draft's own
// softmax at the request's temperature, whose probabilities go to the verifier's general
// rule (min(1, p/q) acceptance), from the request's seed on a stream of their own. Its KV lives in
// its own KvCache and KvPool (the draft's layer shapes differ from the target's), with the same
// block count as the target's pool and its own prefix cache, under the target's sequence ids.
//
// One propose() call runs every sequence's drafting together: a first forward with each
// sequence's tokens that the draft has not seen (its prompt the first time, then the tokens
// the target accepted since), then k - 1 forwards of one token per sequence. The draft's KV
// keeps the sequence's real tokens (committed and published); the draft positions are
// rolled back after the call, and the next call catches up on what the target accepted.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "llm/kv_cache.h"
#include "llm/model.h"
#include "serving/kv_pool.h"

namespace parley {

class DraftRunner {
 public:
  // The draft must have the target's vocabulary size; n_blocks: its KV pool's blocks.
  DraftRunner(const LlmModel& draft, int64_t target_vocab, int64_t n_blocks);

  struct Job {
    KvRequestId id = 0;                   // the target's sequence id
    std::span<const int32_t> tokens;      // the sequence so far (prompt and accepted output)
    int k = 0;                            // drafts wanted
    std::vector<int32_t>* out = nullptr;  // the drafts are appended (none when its KV is full)
    // Sampled drafts (temperature > 0 and probs given): q = softmax(logits / temperature),
    // the draw at position t from philox(seed, stream's draft lane, t); each draft's q row
    // [vocab] is appended to probs.
    float temperature = 0;
    uint64_t seed = 0, stream = 0;
    std::vector<float>* probs = nullptr;
  };
  void propose(std::span<const Job> jobs);
  // The sequence ended: its draft KV blocks go back (cached full blocks stay cached).
  void release(KvRequestId id);

  uint64_t forwards() const { return forwards_; }
  double seconds() const { return seconds_; }  // in propose()

 private:
  const LlmModel& model_;
  KvCache cache_;
  KvPool pool_;
  ForwardScratch scratch_;
  Batch batch_;
  Tensor logits_;
  std::unordered_map<KvRequestId, size_t> known_;  // tokens the pool has of each sequence
  uint64_t forwards_ = 0;
  double seconds_ = 0;
};

}  // namespace parley
