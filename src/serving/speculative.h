// Speculative decoding's proposers (issue 27; DESIGN.md section 8, "Verifier"): cheap guesses
// of a sequence's next tokens that the engine checks in one forward (serving/llm_engine.h
// runs the verifier). A proposal is only a guess: whatever it says, the verified output is
// the one the model gives without speculation (greedy: token for token; sampled: the same
// draws, see llm_engine.cpp), so a bad proposer costs speed, never correctness.
//
// Proposers without a distribution of their own (these) count as a one-hot draft q: the
// acceptance rule min(1, p(d) / q(d)) accepts d with probability p(d), and a rejection
// resamples from max(p - q, 0) normalized, i.e. p without d. Drawing x from p with the
// row's usual uniform and accepting d when x == d is exactly that rule, so the verifier
// does it that way and the output equals the plain output draw for draw.
//
//   - prompt lookup (`ngram`, vLLM's NgramProposer): the longest n-gram of n in
//     [ngram_min, ngram_max] that ends the sequence and occurred before in it (prompt and
//     output), its earliest occurrence; the k tokens that followed it. vLLM's defaults:
//     n in [5, 5].
//   - suffix decoding (`suffix`, Oliaro et al. 2024, "SuffixDecoding"; Snowflake's Arctic
//     Inference): a suffix trie of bounded depth over the request's own tokens and a global
//     one over earlier outputs (per cache_salt namespace); the longest suffix of the
//     sequence found in a trie, then its most frequent continuation while the product of
//     the branch frequencies stays at or above suffix_min_prob.
//   - a draft model (`draft`, serving/draft_runner.h): a smaller model with the same
//     tokenizer proposes its greedy continuation (one-hot), or for a sampled request draws
//     from its own distribution q, which the verifier's general rule takes; the engine runs
//     it, batched over the sequences (make_proposer gives no per-sequence proposer for it).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace parley {

// mtp: the checkpoint's multi-token-prediction module (llm/mtp.h) drafts one token.
enum class SpecMethod { none, ngram, suffix, draft, mtp };
std::string_view to_string(SpecMethod m);          // "none", "ngram", "suffix", "draft", "mtp"
SpecMethod parse_spec_method(std::string_view s);  // throws Error(invalid_argument)

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::none;
  int num_tokens = 4;  // k: draft tokens per step at most (`--num-speculative-tokens`)
  int ngram_min = 5;   // prompt lookup's n-gram lengths (`--prompt-lookup-min/max`)
  int ngram_max = 5;
  int suffix_depth = 24;         // the suffix tries' depth (longest pattern + continuation)
  double suffix_min_prob = 0.1;  // stop a suffix draft below this estimated probability
  // Output tokens a namespace's global trie keeps (the newest; about depth nodes each).
  size_t suffix_global_tokens = size_t(1) << 15;
  // The engine's own (not a request's): no drafts in a step where at least this many
  // sequences are decoding (0: never), where verify rows cost more than the steps they save
  // (vLLM's disable_by_batch_size; `--speculative-disable-by-batch-size`).
  int disable_by_batch_size = 0;
  bool enabled() const { return method != SpecMethod::none && num_tokens > 0; }
};
void validate(const SpeculativeConfig& c);  // throws Error(invalid_argument) naming the field

// Prompt lookup: up to k tokens that followed the earliest occurrence of the longest n-gram
// (n in [min_n, max_n]) ending `tokens`, found earlier in `tokens`; appended to `out`.
void propose_ngram(std::span<const int32_t> tokens, int min_n, int max_n, int k,
                   std::vector<int32_t>& out);

// A suffix trie of bounded depth: every substring of at most `depth` tokens of the sequences
// added, with how often it occurred. Edges live in one hash map (node, token) -> node, and
// each node keeps its most frequent child (counts only grow, so that is O(1) per update).
class SuffixTrie {
 public:
  explicit SuffixTrie(int depth);

  // Tokens appended to sequence `seq` (a trie may index several sequences; each keeps its
  // own open suffixes). Substrings never span two sequences.
  void extend(uint32_t seq, std::span<const int32_t> tokens);
  void end_sequence(uint32_t seq);  // forget its open suffixes (its substrings stay)
  void clear();

  struct Draft {
    std::vector<int32_t> tokens;
    int match = 0;     // length of the context suffix it continues
    double score = 0;  // expected accepted tokens: the sum of the path's probabilities
  };
  // The longest suffix of `context` (at most depth - k tokens) that occurred in the trie
  // with a continuation, then its most frequent child (ties: the first seen) while the
  // product of child / parent counts stays >= min_prob, at most k tokens.
  Draft propose(std::span<const int32_t> context, int k, double min_prob) const;

 private:
  struct Node {
    uint32_t count = 0;
    uint32_t best = 0;   // the most frequent child (0: none; the root is never a child)
    int32_t token = -1;  // on the edge into it
    int32_t depth = 0;
  };
  static uint64_t key(uint32_t node, int32_t token) {
    return (uint64_t(node) << 32) | uint32_t(token);
  }
  uint32_t find(uint32_t node, int32_t token) const;  // 0 when missing
  uint32_t step(uint32_t node, int32_t token);        // counted, created when missing
  int depth_;
  std::vector<Node> nodes_;  // [0] the root
  std::unordered_map<uint64_t, uint32_t> edges_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> open_;  // per sequence: open suffixes
};

// A request's proposer state: what it proposes from and the global tries it reads.
class SuffixCache {
 public:
  explicit SuffixCache(const SpeculativeConfig& config) : config_(config) {}
  // The global trie of a cache_salt namespace (created on first use).
  SuffixTrie& global(const std::string& ns);
  // A finished output joins its namespace's global trie; the oldest outputs are dropped
  // (the trie rebuilt) when the kept tokens pass suffix_global_tokens.
  void add_output(const std::string& ns, std::span<const int32_t> output);

 private:
  struct Space {
    std::unique_ptr<SuffixTrie> trie;
    std::deque<std::vector<int32_t>> outputs;
    size_t tokens = 0;
  };
  SpeculativeConfig config_;
  std::map<std::string, Space> spaces_;
};

// One sequence's proposer (a choice of a request): fed the sequence's tokens as they grow,
// asked for up to k drafts before each verify step.
class Proposer {
 public:
  virtual ~Proposer() = default;
  // tokens: the whole sequence so far (prompt and accepted output); out gets the drafts.
  virtual void propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out) = 0;
};

// The proposer of a sequence for `config` (null for none). cache and ns: the suffix method's
// global trie of earlier outputs (cache may be null: the sequence's own trie only).
// prediction: the output the client expects (OpenAI's Predicted Outputs), searched before
// the sequence itself (prompt lookup: prediction then sequence, the earliest match first;
// suffix: indexed into the sequence's own trie as a sequence of its own).
std::unique_ptr<Proposer> make_proposer(const SpeculativeConfig& config, SuffixCache* cache,
                                        const std::string& ns,
                                        std::span<const int32_t> prediction = {});

// What a request with a predicted output and no method of its own uses: prompt lookup over
// the prediction and the sequence, n in [1, 5] (a single token re-synchronizes after an
// edit; the longest match wins), k from `base` (4 when base has none).
SpeculativeConfig prediction_config(const SpeculativeConfig& base);

}  // namespace parley
