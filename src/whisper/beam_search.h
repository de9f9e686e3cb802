// Beam search over one audio window, as openai/whisper's BeamSearchDecoder
// (whisper/decoding.py): every step each beam proposes its beam_size + 1 most likely next
// tokens, the candidates are ranked by cumulative log-probability, sequences that end in
// <|endoftext|> join the finished list (at most round(beam_size * patience) of them) and the
// best beam_size unfinished ones go on. The search completes when the finished list is
// full; finalize() tops it up with the best unfinished beams when fewer than beam_size
// finished. The decoder's rows are reordered by the returned source indices (one batch of
// beam_size rows per step, see WhisperSession::decode_rows).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/ops/timestamp_rule.h"

namespace parley {

struct BeamCandidate {
  std::vector<int32_t> tokens;  // the whole sequence: initial tokens, sampled, <|endoftext|>
  float sum_logprob = 0;
};

// A beam step made on the device (the engine's beam_step, WhisperSession::beam_chain_result):
// row i continues former row source[i] with tokens[i] at score sums[i]; finished lists the
// sequences that finished at this step, best first: former row `row` + <|endoftext|> at
// `score` (already cut to the finished list's limit); completed: the finished list is full.
struct BeamStepRecord {
  struct Finished {
    int32_t row = 0;
    float score = 0;
  };
  std::vector<int32_t> source, tokens;
  std::vector<float> sums;
  std::vector<Finished> finished;
  bool completed = false;
};

// The most beams a chain runs (each row's beam_size + 1 candidates ranked in one block).
constexpr int kBeamChainMaxRows = 31;

// Where beam search chained on a device starts (WhisperSession::beam_chain_begin and
// beam_chain_begin_initial; beam_chain_start, logit_filters.h, fills it): per row (the
// forked rows, or the one sequence of a window's initial pass) its last token (the chain's
// first step decodes it), that step's rule row (kRuleWidth values, logit_filters.h), its
// timestamp grammar state (kTimestampRuleState values, timestamp_rule_state) and its score;
// how many sequences have finished and how many end the search (BeamSearch::max_candidates);
// the ids suppressed at every position (always_masked) and the tokenizer's grammar tokens.
struct BeamChainStart {
  std::vector<int32_t> tokens, rules, states;
  std::vector<float> sums;
  int finished = 0;
  int max_finished = 1;
  std::span<const int32_t> always;
  TimestampRuleParams grammar;
};

class BeamSearch {
 public:
  // patience: nullopt means 1.0 (the reference's `patience or 1.0`).
  BeamSearch(int beam_size, int32_t eot, std::optional<float> patience);

  int beam_size() const { return beam_size_; }
  int max_candidates() const { return max_candidates_; }

  struct Step {
    std::vector<int32_t> source;  // row i continues former row source[i]
    bool completed = false;       // enough finished sequences
  };
  // rows: the beam_size sequences so far (updated in place: reordered and extended);
  // logprobs: [beam_size][n_vocab] log-softmax of each row's filtered logits; sum_logprobs:
  // per row, f32 as the reference's tensor (updated in place).
  Step update(std::vector<std::vector<int32_t>>& rows, std::span<const std::vector<float>> logprobs,
              std::vector<float>& sum_logprobs);
  // The same from each row's k >= beam_size + 1 best tokens, best first (larger
  // log-probability, lower id on ties), as the engine's masked_topk returns them:
  // top_ids and top_logprobs [beam_size * k], row by row. Only the first beam_size + 1 of
  // each row are read.
  Step update(std::vector<std::vector<int32_t>>& rows, std::span<const int32_t> top_ids,
              std::span<const float> top_logprobs, int k, std::vector<float>& sum_logprobs);

  // A step made on the device (beam_step, over rows that are all different sequences, as
  // every step after the first): what update() would have done with the same candidates.
  // Throws Error(internal) when the record disagrees with the finished list kept here.
  Step apply(std::vector<std::vector<int32_t>>& rows, const BeamStepRecord& record,
             std::vector<float>& sum_logprobs);
  int n_finished() const { return int(finished_.size()); }

  // The finished sequences in the order they finished, topped up with the unfinished rows
  // (best first, each + <|endoftext|>) while fewer than beam_size finished.
  std::vector<BeamCandidate> finalize(const std::vector<std::vector<int32_t>>& rows,
                                      std::span<const float> sum_logprobs) const;

 private:
  int beam_size_;
  int32_t eot_;
  int max_candidates_;
  std::vector<BeamCandidate> finished_;
  // Scratch of update() from full rows.
  std::vector<int32_t> top_;
  std::vector<int32_t> top_ids_;
  std::vector<float> top_logprobs_;
};

}  // namespace parley
