// The shared decoder passes of batched transcription (batch_steps.h).
#include "whisper/batch_steps.h"

#include <algorithm>
#include <numeric>

#include "engine/env.h"
#include "engine/threadpool.h"
#include "whisper/batch_session.h"
#include "whisper/logit_filters.h"

namespace parley::whisper {
namespace {

// At most this many initial tokens per batched prefill pass (its activations; only two
// logits rows per window come back).
constexpr int64_t kPrefillTokens = 8192;

// Whether windows of different lengths share a prefill pass (PARLEY_RAGGED_PREFILL=0: only
// windows of one length do, as before; to compare the two).
bool ragged_prefill_enabled() {
  static const bool on = env_switch_on("PARLEY_RAGGED_PREFILL");
  return on;
}

// The rule rows of the listed searches' next step (kRuleWidth each, logit_filters.h), when
// every one of them can have its choice made on the device with one shared set of
// suppressed ids; false otherwise (the step then filters on the host).
bool device_rules(std::span<WindowSearch* const> searches, std::vector<int32_t>& rules) {
  rules.clear();
  StepRule rule;
  const std::vector<int32_t>& always = searches[0]->always_masked();
  for (const WindowSearch* search : searches) {
    if (search->always_masked() != always || !search->next_rule(rule)) return false;
    rules.insert(rules.end(), rule.v.begin(), rule.v.end());
  }
  return true;
}

}  // namespace

// Windows sorted by length share a pass (prefill_ragged, the shorter ones padded) while it
// stays within kPrefillTokens rows and its pads are at most a quarter of its real tokens.
// Only the two logits rows each window reads come back (WindowSearch::first): at its
// <|startoftranscript|> and its last initial token. A pass's windows take those rows on the
// CPU threads (each is a few passes over the vocabulary: the no-speech probability, the
// timestamp rule, the first token's log-probability), unless `serial`.
void prefill_windows(WhisperBatchSession& batch, std::span<const int32_t> slots,
                     std::span<WindowSearch* const> searches, bool serial) {
  const auto length = [&](int32_t i) {
    return int64_t(searches[size_t(i)]->initial_tokens().size());
  };
  std::vector<int32_t> order(searches.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return length(a) < length(b); });
  const bool ragged = ragged_prefill_enabled();
  std::vector<int32_t> group, group_slots, tokens, lengths;
  std::vector<int64_t> rows;
  for (size_t g0 = 0, g1 = 0; g0 < order.size(); g0 = g1) {
    int64_t real = length(order[g0]);
    for (g1 = g0 + 1; g1 < order.size(); ++g1) {
      const int64_t len = length(order[g1]), count = int64_t(g1 - g0) + 1;  // len: the longest
      if (!ragged && len != length(order[g0])) break;
      if (count * len > kPrefillTokens || 4 * count * len > 5 * (real + len)) break;
      real += len;
    }
    group.assign(order.begin() + int64_t(g0), order.begin() + int64_t(g1));
    group_slots.clear();
    tokens.clear();
    lengths.clear();
    rows.clear();
    for (int32_t i : group) {
      const WindowSearch& search = *searches[size_t(i)];
      group_slots.push_back(slots[size_t(i)]);
      tokens.insert(tokens.end(), search.initial_tokens().begin(), search.initial_tokens().end());
      lengths.push_back(int32_t(length(i)));
      rows.push_back(search.sot_index());
      rows.push_back(length(i) - 1);
    }
    const Tensor logits = group.size() == 1
                              ? batch.prefill(group_slots[0], tokens, rows)
                              : batch.prefill_ragged(group_slots, tokens, lengths, rows);
    const int64_t v = logits.dim(1);
    const auto first = [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        const float* at_sot = logits.data<float>() + 2 * k * v;
        searches[size_t(group[size_t(k)])]->first({at_sot, size_t(v)}, {at_sot + v, size_t(v)});
      }
    };
    if (serial)
      first(0, int64_t(group.size()));
    else
      cpu_threads().parallel_for(int64_t(group.size()), 1, first);
  }
}

void step_windows(WhisperBatchSession& batch, std::span<const int32_t> slots,
                  std::span<WindowSearch* const> searches, bool on_device, StepScratch& scratch) {
  scratch.tokens.clear();
  for (const WindowSearch* search : searches) scratch.tokens.push_back(search->last_token());
  if (on_device && device_rules(searches, scratch.rules)) {
    // Filters, log-softmax and argmax on the device: n token ids come back, not n rows of
    // logits.
    batch.step_choose(slots, scratch.tokens, searches[0]->always_masked(), scratch.rules, 1,
                      scratch.ids, scratch.logprobs);
    for (size_t r = 0; r < searches.size(); ++r)
      searches[r]->next_chosen(scratch.ids[r], scratch.logprobs[r]);
    return;
  }
  const Tensor logits = batch.step(slots, scratch.tokens);
  const int64_t n_vocab = logits.dim(1);
  // Each row's logit filters and choice on the CPU threads (rows are independent; at batch 64
  // these are 64 passes over the vocabulary per step).
  cpu_threads().parallel_for(int64_t(searches.size()), 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      searches[size_t(r)]->next({logits.data<float>() + r * n_vocab, size_t(n_vocab)});
  });
}

}  // namespace parley::whisper
