// Sampling, best_of, beam search (patience, length_penalty) and the batched decoder rows
// against a scripted probability tree (exact results that greedy decoding does not give),
// the beam search's bookkeeping against the rules of openai/whisper's BeamSearchDecoder, the
// random draws, and, with the real tiny.en, WhisperSession's batched rows against separate
// single-row decodes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "engine/alloc_stats.h"
#include "engine/error.h"
#include "whisper/beam_search.h"
#include "whisper/decoding.h"
#include "whisper/model.h"
#include "whisper/sampling.h"
#include "whisper/synth.h"
#include "whisper/tokenizer.h"
#include "whisper/whisper_test_util.h"

namespace parley {
namespace {

using whisper_test::english;
using whisper_test::model_dir;

Tensor silent_mel() { return Tensor::zeros({80, 3000}, DType::f32); }

// A language model given as a tree: the sampled tokens so far -> {token: probability}; the
// logits are log(p) there and -40 elsewhere (~2e-13 of mass in all). It keeps its own
// sequence per row (fork copies, decode_rows appends, reorder_rows permutes), so a decoder
// that forgets to reorder its rows gets the wrong rows' logits.
class TreeSource : public LogitsSource {
 public:
  using Tree = std::map<std::vector<int32_t>, std::map<int32_t, double>>;
  TreeSource(const WhisperTokenizer& tok, Tree tree) : tok_(tok), tree_(std::move(tree)) {}

  void encode(const Tensor&) override {}
  // The first call after reset() gets the initial tokens; later ones (one candidate) extend
  // the single sequence.
  Tensor decode(std::span<const int32_t> tokens) override {
    ++decodes;
    EXPECT_TRUE(rows_.empty());
    if (started_) single_.insert(single_.end(), tokens.begin(), tokens.end());
    started_ = true;
    Tensor logits = Tensor::zeros({int64_t(tokens.size()), tok_.n_vocab()}, DType::f32);
    fill_row(logits, int64_t(tokens.size()) - 1, single_);
    return logits;
  }
  void reset() override {
    rows_.clear();
    single_.clear();
    started_ = false;
  }
  void fork(int n) override {
    forks.push_back(n);
    rows_.assign(size_t(n), {});
  }
  Tensor decode_rows(std::span<const int32_t> tokens) override {
    EXPECT_EQ(tokens.size(), rows_.size());
    batch_sizes.push_back(int(tokens.size()));
    Tensor logits = Tensor::zeros({int64_t(tokens.size()), tok_.n_vocab()}, DType::f32);
    for (size_t r = 0; r < tokens.size(); ++r) {
      rows_[r].push_back(tokens[r]);
      fill_row(logits, int64_t(r), rows_[r]);
    }
    return logits;
  }
  void reorder_rows(std::span<const int32_t> source) override {
    const auto old = rows_;
    for (size_t r = 0; r < source.size(); ++r) rows_[r] = old[size_t(source[r])];
    ++reorders;
  }
  int n_text_ctx() const override { return 448; }
  int n_mels() const override { return 80; }

  int decodes = 0;
  int reorders = 0;
  std::vector<int> forks;
  std::vector<int> batch_sizes;

 private:
  void fill_row(Tensor& logits, int64_t r, const std::vector<int32_t>& seq) const {
    float* p = logits.data<float>() + r * tok_.n_vocab();
    std::fill(p, p + tok_.n_vocab(), -40.0f);
    const auto it = tree_.find(seq);
    if (it == tree_.end()) {
      p[tok_.eot()] = 0.0f;  // unknown: end
      return;
    }
    for (const auto& [t, prob] : it->second) p[t] = float(std::log(prob));
  }

  const WhisperTokenizer& tok_;
  Tree tree_;
  bool started_ = false;
  std::vector<int32_t> single_;
  std::vector<std::vector<int32_t>> rows_;
};

// Text only, no filters: the tree alone decides.
DecodingOptions plain() {
  DecodingOptions o;
  o.without_timestamps = true;
  o.suppress_blank = false;
  o.suppress_tokens = "";
  return o;
}

constexpr int32_t kA = 100, kB = 200, kC = 300, kX = 400, kY = 500;

// Greedy takes A (0.5) and then a flat continuation; the beam finds B C (0.4 * 0.99).
TreeSource::Tree garden_path(int32_t eot) {
  return {
      {{}, {{kA, 0.5}, {kB, 0.4}, {kC, 0.1}}},
      {{kA}, {{kX, 0.25}, {kY, 0.25}, {kC, 0.25}, {kB, 0.25}}},
      {{kB}, {{kC, 0.99}, {eot, 0.01}}},
      {{kA, kX}, {{eot, 0.99}, {kA, 0.01}}},
      {{kA, kY}, {{eot, 0.99}, {kA, 0.01}}},
      {{kA, kC}, {{eot, 0.99}, {kA, 0.01}}},
      {{kA, kB}, {{eot, 0.99}, {kA, 0.01}}},
      {{kB, kC}, {{eot, 0.99}, {kA, 0.01}}},
      {{kC}, {{eot, 0.99}, {kA, 0.01}}},
  };
}

TEST(BeamSearchDecoding, FindsTheLikelierSequenceGreedyMisses) {
  const auto& tok = english();
  {
    TreeSource src(tok, garden_path(tok.eot()));
    const DecodingResult greedy = decode_window(src, tok, silent_mel(), plain());
    // A, then the first of four equal continuations (the lowest id, as torch.argmax).
    EXPECT_EQ(greedy.tokens, (std::vector<int32_t>{kA, kB}));
    EXPECT_TRUE(src.forks.empty());
  }
  TreeSource src(tok, garden_path(tok.eot()));
  DecodingOptions o = plain();
  o.beam_size = 3;
  const DecodingResult r = decode_window(src, tok, silent_mel(), o);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{kB, kC}));
  // sum of log-probs (B, C, eot) / (2 + 1)
  const double expected = (std::log(0.4) + std::log(0.99) + std::log(0.99)) / 3.0;
  EXPECT_NEAR(r.avg_logprob, expected, 1e-5);
  // One pass over the initial tokens, then every step one batch of all 3 beams.
  EXPECT_EQ(src.decodes, 1);
  EXPECT_EQ(src.forks, std::vector<int>{3});
  ASSERT_FALSE(src.batch_sizes.empty());
  for (int b : src.batch_sizes) EXPECT_EQ(b, 3);
  EXPECT_GT(src.reorders, 0);
}

TEST(BeamSearchDecoding, OnTokenGetsTheChosenBeamAndCancelledStops) {
  const auto& tok = english();
  TreeSource src(tok, garden_path(tok.eot()));
  DecodingOptions o = plain();
  o.beam_size = 3;
  std::vector<int32_t> seen;
  o.on_token = [&](int32_t t) { seen.push_back(t); };
  decode_window(src, tok, silent_mel(), o);
  EXPECT_EQ(seen, (std::vector<int32_t>{kB, kC, tok.eot()}));
  int polls = 0;
  o.cancelled = [&] { return ++polls == 2; };
  TreeSource src2(tok, garden_path(tok.eot()));
  try {
    decode_window(src2, tok, silent_mel(), o);
    FAIL() << "expected Error(cancelled)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::cancelled);
  }
  EXPECT_EQ(src2.batch_sizes.size(), 0u);  // stopped before the first batched step
}

TEST(BeamSearchDecoding, LengthPenaltyChangesTheRanking) {
  const auto& tok = english();
  const int32_t eot = tok.eot();
  // A short candidate (A eot: 0.6) and a long one (B C C eot: 0.4).
  const TreeSource::Tree tree = {
      {{}, {{kA, 0.6}, {kB, 0.4}}}, {{kA}, {{eot, 1.0}}},         {{kB}, {{kC, 1.0}}},
      {{kB, kC}, {{kC, 1.0}}},      {{kB, kC, kC}, {{eot, 1.0}}},
  };
  auto run = [&](std::optional<float> length_penalty) {
    TreeSource src(tok, tree);
    DecodingOptions o = plain();
    o.beam_size = 2;
    o.patience = 2.0f;  // wait for 4 finished candidates, so the long one gets in
    o.length_penalty = length_penalty;
    return decode_window(src, tok, silent_mel(), o).tokens;
  };
  // By sum / length: log .6 / 1 = -0.51 vs log .4 / 3 = -0.31.
  EXPECT_EQ(run(std::nullopt), (std::vector<int32_t>{kB, kC, kC}));
  // alpha 0: no normalisation: -0.51 vs -0.92.
  EXPECT_EQ(run(0.0f), (std::vector<int32_t>{kA}));
  // alpha 1: -0.51 / 1 vs -0.92 / ((5 + 3) / 6) = -0.69.
  EXPECT_EQ(run(1.0f), (std::vector<int32_t>{kA}));
}

TEST(BeamSearchDecoding, PatienceWaitsForMoreFinishedCandidates) {
  const auto& tok = english();
  const int32_t eot = tok.eot();
  // Two quick endings (A eot, B eot) and a later, better one (C Y Y eot).
  const TreeSource::Tree tree = {
      {{}, {{kA, 0.4}, {kB, 0.35}, {kC, 0.25}}},
      {{kA}, {{eot, 1.0}}},
      {{kB}, {{eot, 1.0}}},
      {{kC}, {{kY, 1.0}}},
      {{kC, kY}, {{kY, 1.0}}},
      {{kC, kY, kY}, {{eot, 1.0}}},
  };
  auto run = [&](std::optional<float> patience, int* steps) {
    TreeSource src(tok, tree);
    DecodingOptions o = plain();
    o.beam_size = 3;
    o.patience = patience;
    const auto tokens = decode_window(src, tok, silent_mel(), o).tokens;
    *steps = int(src.batch_sizes.size());
    return tokens;
  };
  int steps1 = 0, steps2 = 0;
  // patience 1: done once 3 have finished (A, B and a -40 tail): A eot (-0.92) wins.
  EXPECT_EQ(run(std::nullopt, &steps1), (std::vector<int32_t>{kA}));
  // patience 2: six must finish; C Y Y (log .25 / 3 = -0.46) is among them.
  EXPECT_EQ(run(2.0f, &steps2), (std::vector<int32_t>{kC, kY, kY}));
  EXPECT_GT(steps2, steps1);
}

TEST(BeamSearch, BookkeepingFollowsTheReference) {
  const int32_t eot = 9;
  // round(2 * 1.25) = round(2.5) = 2 (half to even); round(2 * 1.5) = 3.
  EXPECT_EQ(BeamSearch(2, eot, 1.25f).max_candidates(), 2);
  EXPECT_EQ(BeamSearch(2, eot, 1.5f).max_candidates(), 3);
  EXPECT_EQ(BeamSearch(2, eot, std::nullopt).max_candidates(), 2);
  EXPECT_EQ(BeamSearch(2, eot, 0.0f).max_candidates(), 2);  // `patience or 1.0`
  EXPECT_THROW(BeamSearch(2, eot, 0.2f), Error);            // round(0.4) = 0

  BeamSearch beams(2, eot, std::nullopt);
  std::vector<std::vector<int32_t>> rows = {{1}, {1}};  // identical at the first step
  std::vector<float> sums = {0, 0};
  auto lp = [](std::map<int, float> m) {
    std::vector<float> row(10, -100.0f);
    for (auto [t, v] : m) row[size_t(t)] = v;
    return row;
  };
  // Equal rows give one candidate per token: 3 (best), eot (finished), 5.
  std::vector<std::vector<float>> logprobs = {lp({{3, -0.1f}, {eot, -0.5f}, {5, -1.0f}}),
                                              lp({{3, -0.1f}, {eot, -0.5f}, {5, -1.0f}})};
  BeamSearch::Step step = beams.update(rows, logprobs, sums);
  EXPECT_EQ(rows, (std::vector<std::vector<int32_t>>{{1, 3}, {1, 5}}));
  EXPECT_EQ(sums, (std::vector<float>{-0.1f, -1.0f}));
  EXPECT_FALSE(step.completed);
  // Row 1 (1 5) ends best (-1.01); row 0 (1 3) goes on twice (-1.3, -1.4). A finished
  // candidate ranked below the beam_size-th unfinished one would be dropped.
  logprobs = {lp({{4, -1.2f}, {6, -1.3f}, {eot, -2.0f}}), lp({{eot, -0.01f}, {7, -3.0f}})};
  step = beams.update(rows, logprobs, sums);
  EXPECT_EQ(step.source, (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(rows, (std::vector<std::vector<int32_t>>{{1, 3, 4}, {1, 3, 6}}));
  EXPECT_EQ(sums, (std::vector<float>{-0.1f + -1.2f, -0.1f + -1.3f}));
  EXPECT_TRUE(step.completed);  // (1 eot) and (1 5 eot) finished
  const auto cands = beams.finalize(rows, sums);
  ASSERT_EQ(cands.size(), 2u);
  EXPECT_EQ(cands[0].tokens, (std::vector<int32_t>{1, eot}));
  EXPECT_FLOAT_EQ(cands[0].sum_logprob, -0.5f);
  EXPECT_EQ(cands[1].tokens, (std::vector<int32_t>{1, 5, eot}));
  EXPECT_FLOAT_EQ(cands[1].sum_logprob, -1.01f);
}

TEST(BeamSearch, FinalizeTopsUpWithTheBestUnfinishedRows) {
  BeamSearch beams(3, 9, std::nullopt);
  const std::vector<std::vector<int32_t>> rows = {{1, 2}, {1, 3}, {1, 4}};
  const std::vector<float> sums = {-3.0f, -1.0f, -2.0f};
  const auto cands = beams.finalize(rows, sums);
  ASSERT_EQ(cands.size(), 3u);
  EXPECT_EQ(cands[0].tokens, (std::vector<int32_t>{1, 3, 9}));
  EXPECT_EQ(cands[1].tokens, (std::vector<int32_t>{1, 4, 9}));
  EXPECT_EQ(cands[2].tokens, (std::vector<int32_t>{1, 2, 9}));
}

TEST(Ranker, LengthNormalisationAndPenalty) {
  const std::vector<size_t> lengths = {2, 10};
  const std::vector<float> sums = {-1.0f, -4.0f};
  EXPECT_EQ(rank_candidates(lengths, sums, std::nullopt), 1u);  // -0.5 vs -0.4
  EXPECT_EQ(rank_candidates(lengths, sums, 0.0f), 0u);          // -1 vs -4
  EXPECT_EQ(rank_candidates(lengths, sums, 1.0f), 0u);          // -0.857 vs -1.6
  const std::vector<float> equal = {-1.0f, -5.0f};
  EXPECT_EQ(rank_candidates(lengths, equal, std::nullopt), 0u);  // a tie: the first
}

// ---------------------------------------------------------------- sampling

TEST(Sampling, DrawsDependOnlyOnTheirKey) {
  EXPECT_EQ(uniform_draw(1, 2, 3, 4), uniform_draw(1, 2, 3, 4));
  EXPECT_NE(uniform_draw(1, 2, 3, 4), uniform_draw(2, 2, 3, 4));
  EXPECT_NE(uniform_draw(1, 2, 3, 4), uniform_draw(1, 3, 3, 4));
  EXPECT_NE(uniform_draw(1, 2, 3, 4), uniform_draw(1, 2, 4, 4));
  EXPECT_NE(uniform_draw(1, 2, 3, 4), uniform_draw(1, 2, 3, 5));
  double sum = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = uniform_draw(7, 0, 0, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

TEST(Sampling, FrequenciesFollowSoftmaxOverTemperature) {
  // logits (0, 1, 2, -inf) at T = 0.5: p = softmax(0, 2, 4) = 0.016, 0.117, 0.867.
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, -std::numeric_limits<float>::infinity()};
  const double z = 1 + std::exp(2.0) + std::exp(4.0);
  const double p[3] = {1 / z, std::exp(2.0) / z, std::exp(4.0) / z};
  std::vector<int> count(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i)
    ++count[size_t(sample_token(logits, 0.5f, uniform_draw(3, 0, 0, uint64_t(i))))];
  EXPECT_EQ(count[3], 0);
  for (int k = 0; k < 3; ++k) {
    const double sd = std::sqrt(p[k] * (1 - p[k]) / n);
    EXPECT_NEAR(double(count[size_t(k)]) / n, p[k], 5 * sd) << k;
  }
  // T = 2 flattens it: softmax(0, 0.5, 1).
  std::fill(count.begin(), count.end(), 0);
  for (int i = 0; i < n; ++i)
    ++count[size_t(sample_token(logits, 2.0f, uniform_draw(4, 0, 0, uint64_t(i))))];
  const double z2 = 1 + std::exp(0.5) + std::exp(1.0);
  EXPECT_NEAR(double(count[0]) / n, 1 / z2, 0.01);
  EXPECT_NEAR(double(count[2]) / n, std::exp(1.0) / z2, 0.01);
}

// Five tokens at 0.2 each, three steps: 125 equally likely transcripts.
TreeSource::Tree flat_tree(int32_t eot) {
  TreeSource::Tree tree;
  const std::vector<int32_t> five = {kA, kB, kC, kX, kY};
  std::map<int32_t, double> flat;
  for (int32_t t : five) flat[t] = 0.2;
  tree[{}] = flat;
  for (int32_t a : five) {
    tree[{a}] = flat;
    for (int32_t b : five) tree[{a, b}] = {{eot, 1.0}};
  }
  return tree;
}

TEST(SamplingDecoding, SeedGivesTheSameTranscriptAndOtherSeedsOthers) {
  const auto& tok = english();
  auto run = [&](uint64_t seed, int best_of, TreeSource::Tree tree) {
    TreeSource src(tok, std::move(tree));
    DecodingOptions o = plain();
    o.temperature = 1.0f;
    o.seed = seed;
    o.best_of = best_of;
    return decode_window(src, tok, silent_mel(), o).tokens;
  };
  const auto tree = flat_tree(tok.eot());
  EXPECT_EQ(run(5, 0, tree), run(5, 0, tree));
  std::set<std::vector<int32_t>> seen;
  for (uint64_t seed = 0; seed < 20; ++seed) seen.insert(run(seed, 0, tree));
  EXPECT_GT(seen.size(), 10u);  // 20 draws from 25 equally likely pairs
  EXPECT_EQ(run(9, 4, tree), run(9, 4, tree));
}

TEST(SamplingDecoding, BestOfDecodesCandidatesAsABatchAndKeepsTheLikeliest) {
  const auto& tok = english();
  const int32_t eot = tok.eot();
  // A is likely but ends in a bad tail; B rarer and clean.
  const TreeSource::Tree tree = {
      {{}, {{kA, 0.7}, {kB, 0.3}}}, {{kA}, {{kX, 0.5}, {kY, 0.5}}}, {{kA, kX}, {{eot, 1.0}}},
      {{kA, kY}, {{eot, 1.0}}},     {{kB}, {{eot, 1.0}}},
  };
  // Score: A x eot: (log .7 + log .5) / 2 = -0.525; B eot: log .3 / 1 = -1.2. best_of
  // keeps an A sequence whenever one was drawn; with 8 candidates that is ~certain.
  int batched = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    TreeSource src(tok, tree);
    DecodingOptions o = plain();
    o.temperature = 1.0f;
    o.best_of = 8;
    o.seed = seed;
    const DecodingResult r = decode_window(src, tok, silent_mel(), o);
    EXPECT_EQ(r.tokens[0], kA) << seed;
    EXPECT_EQ(src.forks, std::vector<int>{8});
    for (int b : src.batch_sizes) batched += b == 8;
  }
  EXPECT_GT(batched, 0);
}

TEST(SamplingDecoding, TemperatureZeroIsArgmaxAndHigherSpreads) {
  const auto& tok = english();
  const int32_t eot = tok.eot();
  const TreeSource::Tree tree = {
      {{}, {{kA, 0.6}, {kB, 0.4}}}, {{kA}, {{eot, 1.0}}}, {{kB}, {{eot, 1.0}}}};
  int b_count = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    TreeSource src(tok, tree);
    DecodingOptions o = plain();
    o.seed = seed;
    o.temperature = 1.0f;
    b_count += decode_window(src, tok, silent_mel(), o).tokens[0] == kB;
    TreeSource greedy_src(tok, tree);
    o.temperature = 0.0f;
    EXPECT_EQ(decode_window(greedy_src, tok, silent_mel(), o).tokens[0], kA);
  }
  EXPECT_NEAR(b_count / 200.0, 0.4, 0.1);
}

// ---------------------------------------------------------------- the real model's rows

float max_abs_row_diff(const Tensor& a, int64_t ra, const Tensor& b, int64_t rb) {
  const int64_t v = a.dim(1);
  float m = 0;
  for (int64_t i = 0; i < v; ++i) {
    m = std::max(m, std::abs(a.data<float>()[ra * v + i] - b.data<float>()[rb * v + i]));
  }
  return m;
}

void batched_rows_match_separate_decodes(const std::string& dir, Device device) {
  const auto model = WhisperModel::load(dir, LoadOptions{device, DType::f32});
  const WhisperTokenizer tok = load_tokenizer(*model);
  WhisperSession batch(model), single(model);
  Tensor mel = Tensor::zeros({80, 3000}, DType::f32);
  for (int64_t i = 0; i < mel.numel(); ++i)
    mel.data<float>()[i] = float(std::sin(0.001 * double(i)));
  batch.encode(mel);
  single.encode(mel);
  const std::vector<int32_t> initial = {tok.sot(), tok.no_timestamps()};
  const int32_t a = 383, b = 1110, c = 632, x = 11, y = 286, z = 13;

  auto reference = [&](std::vector<int32_t> seq) {  // the last row of a fresh decode
    single.reset();
    return single.decode(seq);
  };
  batch.decode(initial);
  batch.fork(3);
  EXPECT_EQ(batch.n_rows(), 3);
  const std::vector<int32_t> step1 = {a, b, c};
  const Tensor l1 = batch.decode_rows(step1);
  ASSERT_EQ(l1.shape(), Shape({3, tok.n_vocab()}));
  for (int r = 0; r < 3; ++r) {
    const Tensor ref = reference({initial[0], initial[1], step1[size_t(r)]});
    EXPECT_LT(max_abs_row_diff(l1, r, ref, 2), 1e-4f) << "row " << r;
  }
  // Row 0 and 1 continue former row 2 (one slot reused, one copied), row 2 continues row 0.
  const std::vector<int32_t> source = {2, 2, 0};
  batch.reorder_rows(source);
  const std::vector<int32_t> step2 = {x, y, z};
  const Tensor l2 = batch.decode_rows(step2);
  const std::vector<std::vector<int32_t>> expect = {{initial[0], initial[1], c, x},
                                                    {initial[0], initial[1], c, y},
                                                    {initial[0], initial[1], a, z}};
  for (int r = 0; r < 3; ++r) {
    const Tensor ref = reference(expect[size_t(r)]);
    EXPECT_LT(max_abs_row_diff(l2, r, ref, 3), 1e-4f) << "row " << r;
  }
  // Again, so that the K/V written by the step after a reorder are read (and one row's
  // copied to a free slot): each row must have found its slot. Rows 0 and 2 continue former
  // row 1 (slot 1), row 1 continues former row 2 (slot 0).
  batch.reorder_rows(std::vector<int32_t>{1, 2, 1});
  const std::vector<int32_t> step3 = {b, c, a};
  const Tensor l3 = batch.decode_rows(step3);
  const std::vector<std::vector<int32_t>> expect3 = {{initial[0], initial[1], c, y, b},
                                                     {initial[0], initial[1], a, z, c},
                                                     {initial[0], initial[1], c, y, a}};
  for (int r = 0; r < 3; ++r) {
    const Tensor ref = reference(expect3[size_t(r)]);
    EXPECT_LT(max_abs_row_diff(l3, r, ref, 4), 1e-4f) << "row " << r << " after two reorders";
  }
  // Warm (one more step, as l1 and l2 hold logits blocks): further steps and reorders
  // allocate nothing, the pools serve every buffer.
  batch.decode_rows(step1);
  const AllocStats before = alloc_stats();
  const std::vector<int32_t> again = {1, 0, 0};
  batch.reorder_rows(again);
  batch.decode_rows(step1);
  batch.decode_rows(step2);
  EXPECT_EQ(alloc_stats().host_allocs, before.host_allocs);
  EXPECT_EQ(alloc_stats().device_allocs, before.device_allocs);
  EXPECT_THROW(batch.decode(step2), Error);  // rows in use
  batch.reset();
  EXPECT_EQ(batch.n_rows(), 0);
  EXPECT_THROW(batch.decode_rows(step2), Error);
}

TEST(WhisperSessionRows, BatchedRowsMatchSeparateDecodes) {
  if (!std::filesystem::exists(model_dir() + "/model.bin")) {
    GTEST_SKIP() << "no tiny.en model at " << model_dir();
  }
  batched_rows_match_separate_decodes(model_dir(), Device::cpu);
}

TEST(WhisperSessionRows, BatchedRowsMatchSeparateDecodesOnCuda) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::string dir = model_dir();
  if (!std::filesystem::exists(dir + "/model.bin")) {  // a synthetic tiny instead
    dir = testing::TempDir() + "/parley_rows_synth_tiny";
    SynthOptions so;
    so.vocab_path = std::string(PARLEY_TEST_DATA) + "/whisper/multilingual.tiktoken";
    write_synth_whisper(so, dir);
  }
  batched_rows_match_separate_decodes(dir, Device::cuda);
}

}  // namespace
}  // namespace parley
