#include "serving/speculative.h"

#include <algorithm>

#include "engine/error.h"

namespace parley {

std::string_view to_string(SpecMethod m) {
  switch (m) {
    case SpecMethod::ngram: return "ngram";
    case SpecMethod::suffix: return "suffix";
    case SpecMethod::draft: return "draft";
    case SpecMethod::mtp: return "mtp";
    case SpecMethod::none: break;
  }
  return "none";
}

SpecMethod parse_spec_method(std::string_view s) {
  if (s == "none" || s == "off" || s.empty()) return SpecMethod::none;
  if (s == "ngram" || s == "prompt_lookup") return SpecMethod::ngram;
  if (s == "suffix") return SpecMethod::suffix;
  if (s == "draft" || s == "draft_model") return SpecMethod::draft;
  // vLLM's names: mtp, and the older per-family deepseek_mtp / mimo_mtp / glm4_moe_mtp.
  if (s == "mtp" || s == "deepseek_mtp" || s == "mimo_mtp" || s == "glm4_moe_mtp")
    return SpecMethod::mtp;
  throw Error(ErrorKind::invalid_argument, "speculative: unknown method '" + std::string(s) +
                                               "' (none, ngram, suffix, draft, mtp)");
}

void validate(const SpeculativeConfig& c) {
  check_arg(c.num_tokens >= 0 && c.num_tokens <= 64,
            "speculative: num_speculative_tokens must be in [0, 64]");
  check_arg(c.disable_by_batch_size >= 0,
            "speculative: disable_by_batch_size must be 0 (never) or more");
  check_arg(c.ngram_min >= 1 && c.ngram_max >= c.ngram_min && c.ngram_max <= 64,
            "speculative: prompt_lookup_min must be >= 1 and <= prompt_lookup_max <= 64");
  check_arg(c.suffix_depth >= 2 && c.suffix_depth <= 256,
            "speculative: the suffix depth must be in [2, 256]");
  check_arg(c.suffix_min_prob >= 0 && c.suffix_min_prob <= 1,
            "speculative: the suffix minimum probability must be in [0, 1]");
}

void propose_ngram(std::span<const int32_t> tokens, int min_n, int max_n, int k,
                   std::vector<int32_t>& out) {
  const int64_t n = int64_t(tokens.size());
  if (k <= 0 || n < int64_t(min_n) + 1) return;
  // For every earlier end position e (a token must follow it: e <= n - 2), how many of the
  // tokens ending at e equal the sequence's last ones, capped at max_n; the best is the
  // longest, the earliest among equals.
  int best_len = 0;
  int64_t best_end = -1;
  for (int64_t e = 0; e + 1 < n; ++e) {
    int len = 0;
    while (len < max_n && len <= e && tokens[size_t(e - len)] == tokens[size_t(n - 1 - len)]) ++len;
    if (len > best_len) {
      best_len = len;
      best_end = e;
      if (len == max_n) break;  // nothing longer counts; later ones are not earlier
    }
  }
  if (best_len < min_n) return;
  const int64_t from = best_end + 1;
  const int64_t to = std::min(n, from + int64_t(k));
  out.insert(out.end(), tokens.begin() + from, tokens.begin() + to);
}

SuffixTrie::SuffixTrie(int depth) : depth_(depth) {
  check_arg(depth >= 2, "[suffix trie] depth must be at least 2");
  clear();
}

void SuffixTrie::clear() {
  nodes_.assign(1, Node{});
  edges_.clear();
  open_.clear();
}

uint32_t SuffixTrie::find(uint32_t node, int32_t token) const {
  auto it = edges_.find(key(node, token));
  return it == edges_.end() ? 0 : it->second;
}

uint32_t SuffixTrie::step(uint32_t node, int32_t token) {
  auto [it, added] = edges_.try_emplace(key(node, token), uint32_t(nodes_.size()));
  if (added) {
    Node c;
    c.token = token;
    c.depth = nodes_[node].depth + 1;
    nodes_.push_back(c);
  }
  const uint32_t c = it->second;
  ++nodes_[c].count;
  Node& parent = nodes_[node];
  if (parent.best == 0 || nodes_[c].count > nodes_[parent.best].count) parent.best = c;
  return c;
}

void SuffixTrie::extend(uint32_t seq, std::span<const int32_t> tokens) {
  std::vector<uint32_t>& open = open_[seq];
  std::vector<uint32_t> next;
  for (int32_t t : tokens) {
    next.clear();
    ++nodes_[0].count;
    for (uint32_t node : open) {
      const uint32_t c = step(node, t);
      if (nodes_[c].depth < depth_) next.push_back(c);
    }
    next.push_back(step(0, t));
    open.swap(next);
  }
}

void SuffixTrie::end_sequence(uint32_t seq) { open_.erase(seq); }

SuffixTrie::Draft SuffixTrie::propose(std::span<const int32_t> context, int k,
                                      double min_prob) const {
  Draft d;
  if (k <= 0 || context.empty()) return d;
  const int64_t longest = std::min<int64_t>(int64_t(context.size()), depth_ - k);
  for (int64_t len = longest; len >= 1 && d.match == 0; --len) {
    uint32_t node = 0;
    for (size_t i = context.size() - size_t(len); i < context.size(); ++i) {
      node = find(node, context[i]);
      if (node == 0) break;
    }
    if (node == 0 || nodes_[node].best == 0) continue;
    d.match = int(len);
    double p = 1;
    while (int(d.tokens.size()) < k && nodes_[node].best != 0) {
      const uint32_t c = nodes_[node].best;
      p *= double(nodes_[c].count) / double(nodes_[node].count);
      if (p < min_prob) break;
      d.tokens.push_back(nodes_[c].token);
      d.score += p;
      node = c;
    }
  }
  return d;
}

SuffixTrie& SuffixCache::global(const std::string& ns) {
  Space& s = spaces_[ns];
  if (!s.trie) s.trie = std::make_unique<SuffixTrie>(config_.suffix_depth);
  return *s.trie;
}

void SuffixCache::add_output(const std::string& ns, std::span<const int32_t> output) {
  if (output.empty()) return;
  SuffixTrie& trie = global(ns);
  Space& s = spaces_.at(ns);
  s.outputs.emplace_back(output.begin(), output.end());
  s.tokens += output.size();
  if (s.tokens <= config_.suffix_global_tokens) {
    trie.extend(0, output);
    trie.end_sequence(0);
    return;
  }
  // Over the limit: keep the newest outputs that fit half of it, and rebuild (the cost of
  // a rebuild is spread over the half-limit of tokens added before the next one).
  while (s.outputs.size() > 1 && s.tokens > config_.suffix_global_tokens / 2) {
    s.tokens -= s.outputs.front().size();
    s.outputs.pop_front();
  }
  trie.clear();
  for (const auto& o : s.outputs) {
    trie.extend(0, o);
    trie.end_sequence(0);
  }
}

SpeculativeConfig prediction_config(const SpeculativeConfig& base) {
  SpeculativeConfig c = base;
  c.method = SpecMethod::ngram;
  c.ngram_min = 1;
  c.ngram_max = 5;
  if (c.num_tokens <= 0) c.num_tokens = 4;
  return c;
}

namespace {

class NgramProposer final : public Proposer {
 public:
  NgramProposer(const SpeculativeConfig& c, std::span<const int32_t> prediction)
      : min_(c.ngram_min),
        max_(c.ngram_max),
        text_(prediction.begin(), prediction.end()),
        prefix_(prediction.size()) {}
  void propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out) override {
    if (prefix_ == 0) return propose_ngram(tokens, min_, max_, k, out);
    // The prediction, then the sequence (which only grows: appended as it does).
    text_.insert(text_.end(), tokens.begin() + std::ptrdiff_t(text_.size() - prefix_),
                 tokens.end());
    propose_ngram(text_, min_, max_, k, out);
  }

 private:
  int min_, max_;
  std::vector<int32_t> text_;
  size_t prefix_;
};

// The sequence's own trie (its prompt and output, indexed as they grow) beside its
// namespace's global trie of earlier outputs; the draft with the higher expected accepted
// length wins (the sequence's own on a tie).
class SuffixProposer final : public Proposer {
 public:
  SuffixProposer(const SpeculativeConfig& c, SuffixCache* cache, std::string ns,
                 std::span<const int32_t> prediction)
      : own_(c.suffix_depth), min_prob_(c.suffix_min_prob), cache_(cache), ns_(std::move(ns)) {
    if (!prediction.empty()) {
      own_.extend(1, prediction);
      own_.end_sequence(1);
    }
  }
  void propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out) override {
    if (tokens.size() > indexed_) {
      own_.extend(0, tokens.subspan(indexed_));
      indexed_ = tokens.size();
    }
    SuffixTrie::Draft best = own_.propose(tokens, k, min_prob_);
    if (cache_) {
      SuffixTrie::Draft g = cache_->global(ns_).propose(tokens, k, min_prob_);
      if (g.score > best.score) best = std::move(g);
    }
    out.insert(out.end(), best.tokens.begin(), best.tokens.end());
  }

 private:
  SuffixTrie own_;
  size_t indexed_ = 0;
  double min_prob_;
  SuffixCache* cache_;
  std::string ns_;
};

}  // namespace

std::unique_ptr<Proposer> make_proposer(const SpeculativeConfig& config, SuffixCache* cache,
                                        const std::string& ns,
                                        std::span<const int32_t> prediction) {
  switch (config.enabled() ? config.method : SpecMethod::none) {
    case SpecMethod::ngram: return std::make_unique<NgramProposer>(config, prediction);
    case SpecMethod::suffix: return std::make_unique<SuffixProposer>(config, cache, ns, prediction);
    case SpecMethod::draft:  // the engine's DraftRunner
    case SpecMethod::mtp:    // the engine's MTP pass
    case SpecMethod::none: break;
  }
  return nullptr;
}

}  // namespace parley
