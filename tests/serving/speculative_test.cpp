// Speculative decoding (issue 27 items 1, 2, 5): the proposers on known sequences, the KV
// rollback, the verifier on synthetic logits (greedy, sampled, stop tokens; the one-hot
// acceptance rule checked statistically on a known distribution), and the engine on the
// trained model (models/parley-chat-target): with prompt lookup and suffix decoding, every
// request's tokens and logprobs equal its plain run, greedy and sampled, B = 1 and B = 8,
// n > 1, stop strings, max_tokens, a token budget that trims the drafts, cancellation; and
// drafts really are accepted (fewer forwards than tokens).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "llm/synth.h"
#include "serving/kv_pool.h"
#include "serving/llm_engine.h"
#include "serving/serving_test_util.h"
#include "serving/speculative.h"
#include "serving/verifier.h"

namespace parley {
namespace {

using Ids = std::vector<int32_t>;

Ids ngram(const Ids& t, int min_n, int max_n, int k) {
  Ids out;
  propose_ngram(t, min_n, max_n, k, out);
  return out;
}

TEST(PromptLookup, LongestNgramItsEarliestOccurrenceAndWhatFollowed) {
  // vLLM's NgramProposer docstring: [1,2,3,4,2,3], n in [2, 3], k = 4: [2,3] matches at the
  // start; three tokens follow it.
  EXPECT_EQ(ngram({1, 2, 3, 4, 2, 3}, 2, 3, 4), (Ids{4, 2, 3}));
  // The longest match wins over an earlier shorter one.
  EXPECT_EQ(ngram({7, 3, 9, 1, 2, 3, 5, 6, 1, 2, 3}, 2, 3, 2), (Ids{5, 6}));
  // Of equal lengths, the earliest.
  EXPECT_EQ(ngram({2, 3, 8, 2, 3, 9, 2, 3}, 2, 2, 1), (Ids{8}));
  // Shorter than min_n: nothing; k caps the draft.
  EXPECT_TRUE(ngram({1, 2, 3, 4, 2, 3}, 3, 3, 4).empty());
  EXPECT_EQ(ngram({5, 1, 2, 3, 4, 5, 1}, 2, 5, 2), (Ids{2, 3}));
  EXPECT_EQ(ngram({5, 1, 2, 3, 4, 5, 1}, 3, 5, 2), (Ids{}));
  EXPECT_TRUE(ngram({1}, 1, 1, 4).empty());
  EXPECT_TRUE(ngram({1, 1}, 1, 1, 0).empty());
  // max_n caps the length compared: a 4-token match counts as 2 with max_n = 2, and the
  // earliest 2-gram wins.
  EXPECT_EQ(ngram({4, 1, 2, 6, 3, 4, 1, 2, 7, 3, 4, 1, 2}, 1, 2, 1), (Ids{6}));
}

TEST(SuffixTrie, MostFrequentContinuationOfTheLongestMatchedSuffix) {
  SuffixTrie t(8);
  t.extend(0, Ids{1, 2, 3, 4});
  t.end_sequence(0);
  t.extend(1, Ids{1, 2, 3, 5});
  t.end_sequence(1);
  t.extend(2, Ids{9, 2, 3, 5, 6});
  t.end_sequence(2);
  // "2 3" was followed by 5 twice, 4 once; "1 2 3" by 4 and 5 once each (4 seen first).
  SuffixTrie::Draft d = t.propose(Ids{0, 2, 3}, 3, 0.0);
  EXPECT_EQ(d.match, 2);
  EXPECT_EQ(d.tokens, (Ids{5, 6}));
  EXPECT_NEAR(d.score, 2.0 / 3 + 2.0 / 3 * 1.0 / 2, 1e-12);
  d = t.propose(Ids{1, 2, 3}, 3, 0.0);
  EXPECT_EQ(d.match, 3);
  EXPECT_EQ(d.tokens, (Ids{4}));
  // min_prob stops the walk: 2/3 then 1/3 (5 -> 6 once of 3... ) falls below 0.5.
  d = t.propose(Ids{2, 3}, 3, 0.5);
  EXPECT_EQ(d.tokens, (Ids{5}));
  // Nothing spans two sequences: "4 1" never occurred.
  EXPECT_TRUE(t.propose(Ids{4}, 2, 0.0).tokens.empty());
  // Unknown context: no draft.
  EXPECT_TRUE(t.propose(Ids{42}, 2, 0.0).tokens.empty());
}

TEST(SuffixTrie, AGrowingSequenceProposesFromItsOwnEarlierTokens) {
  SuffixTrie t(6);
  const Ids s{10, 11, 12, 13, 20, 10, 11};
  t.extend(0, std::span(s).first(5));
  t.extend(0, std::span(s).subspan(5));
  // "10 11" occurred before, followed by "12 13".
  const SuffixTrie::Draft d = t.propose(s, 2, 0.1);
  EXPECT_EQ(d.tokens, (Ids{12, 13}));
}

TEST(SuffixCache, KeepsTheNewestOutputsWithinItsLimit) {
  SpeculativeConfig c;
  c.suffix_global_tokens = 8;
  SuffixCache cache(c);
  cache.add_output("", Ids{1, 2, 3, 4});
  cache.add_output("other", Ids{1, 2, 9, 9});
  EXPECT_EQ(cache.global("").propose(Ids{1, 2}, 2, 0.0).tokens, (Ids{3, 4}));
  cache.add_output("", Ids{5, 6, 7, 8});
  cache.add_output("", Ids{1, 2, 7, 7});  // over 8 tokens: the oldest output goes
  EXPECT_EQ(cache.global("").propose(Ids{1, 2}, 2, 0.0).tokens, (Ids{7, 7}));
  EXPECT_EQ(cache.global("other").propose(Ids{1, 2}, 2, 0.0).tokens, (Ids{9, 9}));
}

TEST(SpeculativeConfig, ParsesAndValidates) {
  EXPECT_EQ(parse_spec_method("ngram"), SpecMethod::ngram);
  EXPECT_EQ(parse_spec_method("suffix"), SpecMethod::suffix);
  EXPECT_EQ(parse_spec_method("none"), SpecMethod::none);
  EXPECT_EQ(parse_spec_method("draft"), SpecMethod::draft);
  EXPECT_THROW(parse_spec_method("medusa"), Error);
  SpeculativeConfig c;
  c.ngram_min = 4;
  c.ngram_max = 3;
  EXPECT_THROW(validate(c), Error);
  c.ngram_max = 4;
  c.num_tokens = 65;
  EXPECT_THROW(validate(c), Error);
}

TEST(KvPoolRollback, RejectedPositionsGiveTheirBlocksBack) {
  KvCache cache(test::tiny_kv_config(), 8);
  KvPool pool(cache);
  pool.lookup_prefix(1, test::seq(15, 100));
  ASSERT_TRUE(pool.allocate(1, 15));
  pool.commit(1, 15);
  const int64_t free_before = pool.free_blocks();
  // The last token and 20 drafts: positions 14..34, three blocks in all.
  ASSERT_TRUE(pool.allocate(1, 21));
  EXPECT_EQ(pool.block_table(1).size(), 3u);
  // Two of them accepted (the token and one draft, plus the correction appended).
  pool.append_tokens(1, Ids{7, 8});
  pool.commit(1, 17);
  pool.rollback(1);
  EXPECT_EQ(pool.block_table(1).size(), 2u);
  EXPECT_EQ(pool.free_blocks(), free_before - 1);
  EXPECT_EQ(pool.num_computed(1), 17);
  // Nothing accepted past a block boundary keeps nothing extra.
  pool.rollback(1);
  EXPECT_EQ(pool.block_table(1).size(), 2u);
}

// Logits that make `token` the argmax by a margin, over `vocab` ids.
std::vector<float> peaked(int32_t vocab, const Ids& argmax) {
  std::vector<float> l(size_t(vocab) * argmax.size(), 0.0f);
  for (size_t i = 0; i < argmax.size(); ++i) l[i * size_t(vocab) + size_t(argmax[i])] = 5.0f;
  return l;
}

TEST(Verifier, GreedyAcceptsTheMatchingPrefixThenTheCorrectionOrTheBonus) {
  const int32_t vocab = 16;
  const Ids eos{15};
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 100;
  const auto run = [&](const Ids& argmax, const Ids& drafts) {
    RowSampling s(p, vocab, Ids{1}, eos);
    const std::vector<float> logits = peaked(vocab, argmax);
    std::vector<SampleResult> out;
    const VerifyRow row{&s, logits.data(), drafts, &out};
    verify_rows(std::span(&row, 1));
    Ids got;
    for (const SampleResult& r : out) got.push_back(r.token);
    EXPECT_EQ(s.step(), int64_t(out.size()));
    return std::pair(got, accepted_drafts(row));
  };
  EXPECT_EQ(run({3, 4, 5, 6}, {3, 4, 5}), std::pair(Ids{3, 4, 5, 6}, 3));  // all + bonus
  EXPECT_EQ(run({3, 9, 5, 6}, {3, 4, 5}), std::pair(Ids{3, 9}, 1));        // correction
  EXPECT_EQ(run({2, 4, 5, 6}, {3, 4, 5}), std::pair(Ids{2}, 0));           // none
  EXPECT_EQ(run({3, 15, 5, 6}, {3, 15, 5}), std::pair(Ids{3, 15}, 2));     // EOS ends it
  EXPECT_EQ(run({8}, {}), std::pair(Ids{8}, 0));                           // a plain step
  // max_tokens ends the walk too.
  p.max_tokens = 2;
  EXPECT_EQ(run({3, 4, 5, 6}, {3, 4, 5}), std::pair(Ids{3, 4}, 2));
}

TEST(Verifier, SampledTokensAreThePlainDrawsWhateverTheDrafts) {
  const int32_t vocab = 32;
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.repetition_penalty = 1.3f;
  p.max_tokens = 100;
  p.seed = 1234;
  p.logprobs = true;
  std::vector<float> logits(size_t(vocab) * 6);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i) * 0.37) * 2.0);
  for (int trial = 0; trial < 50; ++trial) {
    // Plain: position by position.
    RowSampling plain(p, vocab, Ids{1, 2}, Ids{}, uint64_t(trial));
    Ids want;
    for (int pos = 0; pos < 6; ++pos) {
      SampleResult r = plain.sample({logits.data() + pos * vocab, size_t(vocab)});
      plain.accept(r.token);
      want.push_back(r.token);
    }
    // Drafts that agree with the plain draws for a while, then not.
    const int agree = trial % 6;
    Ids drafts(want.begin(), want.begin() + agree);
    if (agree < 5) drafts.push_back((want[size_t(agree)] + 1) % vocab);
    RowSampling spec(p, vocab, Ids{1, 2}, Ids{}, uint64_t(trial));
    std::vector<SampleResult> out;
    const VerifyRow row{&spec, logits.data(), drafts, &out};
    verify_rows(std::span(&row, 1));
    ASSERT_EQ(int(out.size()), std::min(agree + 1, 6)) << trial;
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].token, want[i]) << trial;
    EXPECT_EQ(accepted_drafts(row), agree);
  }
}

// The general rule (a draft d drawn from q, accepted with min(1, p(d)/q(d)), else a token from
// max(p - q, 0)), statistically: the token follows p and the acceptance rate is sum min(p, q).
TEST(Verifier, GeneralRuleFollowsTheTargetDistribution) {
  const std::vector<double> p{0.05, 0.30, 0.10, 0.25, 0.0, 0.30};
  const std::vector<float> q{0.20f, 0.10f, 0.30f, 0.25f, 0.15f, 0.0f};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const int trials = 200000;
  std::vector<int> count(p.size(), 0);
  int accepted = 0;
  for (int t = 0; t < trials; ++t) {
    double u = uni(rng), acc = 0;
    int32_t d = 0;
    for (; d + 1 < int32_t(q.size()); ++d)
      if ((acc += q[size_t(d)]) > u) break;
    bool ok = false;
    const int32_t x = speculative_sample(p, q, d, uni(rng), uni(rng), ok);
    ++count[size_t(x)];
    accepted += ok ? 1 : 0;
    if (ok) {
      EXPECT_EQ(x, d);
    }
  }
  double overlap = 0;
  for (size_t i = 0; i < p.size(); ++i) overlap += std::min(p[i], double(q[i]));
  EXPECT_NEAR(double(accepted) / trials, overlap, 4 * std::sqrt(overlap * (1 - overlap) / trials));
  EXPECT_EQ(count[4], 0);  // p(4) = 0: never output, though q proposes it
  double chi2 = 0;
  int dof = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    const double e = p[i] * trials;
    chi2 += (count[i] - e) * (count[i] - e) / e;
    ++dof;
  }
  EXPECT_EQ(dof, 4);
  EXPECT_LT(chi2, 18.5);  // 4 degrees of freedom: p = 0.001
}

// The same rule through verify_rows with a row's sampler: the first token follows the row's
// processed distribution (temperature 0.8 and top_k 4 here) whatever q proposes.
TEST(Verifier, DraftProbabilitiesGoThroughTheGeneralRule) {
  const int32_t vocab = 6;
  const std::vector<float> logits{0.0f, 1.0f, -0.5f, 0.7f, -2.0f, 0.3f};
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 4;
  sp.max_tokens = 10;
  sp.seed = 7;
  const std::vector<float> q{0.1f, 0.1f, 0.1f, 0.1f, 0.5f, 0.1f};  // favours a banned token
  std::vector<double> p(vocab);
  {
    RowSampling s(sp, vocab, Ids{0}, Ids{});
    s.distribution(logits, p);
  }
  EXPECT_EQ(p[4], 0.0);  // top_k 4 keeps 1, 3, 5, 0
  EXPECT_EQ(p[2], 0.0);
  const int trials = 40000;
  std::vector<int> first(vocab, 0);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  for (int t = 0; t < trials; ++t) {
    RowSampling s(sp, vocab, Ids{0}, Ids{}, uint64_t(t));
    double u = uni(rng), acc = 0;
    int32_t d = 0;
    for (; d + 1 < vocab; ++d)
      if ((acc += q[size_t(d)]) > u) break;
    std::vector<float> two(logits);
    two.insert(two.end(), logits.begin(), logits.end());
    std::vector<SampleResult> out;
    const Ids drafts{d};
    const VerifyRow row{&s, two.data(), drafts, &out, q.data()};
    verify_rows(std::span(&row, 1));
    ++first[size_t(out[0].token)];
  }
  EXPECT_EQ(first[4] + first[2], 0);
  double chi2 = 0;
  for (int i : {0, 1, 3, 5}) {
    const double e = p[size_t(i)] * trials;
    chi2 += (first[size_t(i)] - e) * (first[size_t(i)] - e) / e;
  }
  EXPECT_LT(chi2, 16.3);  // 3 degrees of freedom: p = 0.001
}

// The one-hot acceptance rule, statistically: a draft d is accepted with probability p(d)
// and a rejected step's token follows p without d, renormalized; so the first token follows p.
TEST(Verifier, OneHotDraftsFollowTheTargetDistribution) {
  const int32_t vocab = 6;
  const std::vector<float> logits{0.0f, 1.0f, -0.5f, 0.7f, -2.0f, 0.3f};
  std::vector<double> prob(vocab);
  double z = 0;
  for (int i = 0; i < vocab; ++i) z += std::exp(double(logits[size_t(i)]));
  for (int i = 0; i < vocab; ++i) prob[size_t(i)] = std::exp(double(logits[size_t(i)])) / z;
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = 10;
  p.seed = 99;
  const int32_t draft = 3;
  const int trials = 40000;
  std::vector<int> first(vocab, 0);
  int accepted = 0;
  for (int t = 0; t < trials; ++t) {
    RowSampling s(p, vocab, Ids{0}, Ids{}, uint64_t(t));
    std::vector<float> two(logits);
    two.insert(two.end(), logits.begin(), logits.end());
    std::vector<SampleResult> out;
    const Ids drafts{draft};
    const VerifyRow row{&s, two.data(), drafts, &out};
    verify_rows(std::span(&row, 1));
    ++first[size_t(out[0].token)];
    accepted += accepted_drafts(row);
  }
  // Acceptance rate p(d): within 4 standard deviations.
  const double pd = prob[size_t(draft)];
  EXPECT_NEAR(double(accepted) / trials, pd, 4 * std::sqrt(pd * (1 - pd) / trials));
  // Chi-square of the first token against p (5 degrees of freedom: 20.5 is p = 0.001).
  double chi2 = 0;
  for (int i = 0; i < vocab; ++i) {
    const double e = prob[size_t(i)] * trials;
    chi2 += (first[size_t(i)] - e) * (first[size_t(i)] - e) / e;
  }
  EXPECT_LT(chi2, 20.5);
}

// ---- The engine on the trained model ------------------------------------------------------

// The trained target and its draft (3.1 M parameters, the same tokenizer, for SpecMethod::draft).
test::TrainedChat& trained() { return test::trained_chat(); }

Ids chat_prompt(const std::string& user) { return test::trained_chat_prompt(user); }

const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p{
      "Repeat this list exactly: lantern, meadow, copper, violin, harbor, thistle, "
      "pebble, orchard, falcon, saddle",
      "Here is a list of codes:\nred-fox: 4821\nblue-owl: 9034\ngreen-cat: 1177\n"
      "quiet-bear: 6620\nbrave-wolf: 3408\n\nWhat is the code for quiet-bear?",
      "Fill in a JSON object that matches this schema:\n{\"type\": \"object\", \"properties\": "
      "{\"title\": {\"type\": \"string\"}, \"pages\": {\"type\": \"integer\"}}, \"required\": "
      "[\"title\", \"pages\"], \"additionalProperties\": false}\n\nA book: title is \"Night "
      "Harbor\"; pages is 312.\nAnswer with the JSON only.",
      "What is 482 + 317?",
      "Sort these words alphabetically: walnut, apple, mango, cherry, banana",
      "Repeat the following text exactly:\n\nThe quick brown fox jumps over the lazy dog. The "
      "quick brown fox jumps over the lazy dog again.",
      "Count the items in this list: pear, plum, pear, fig, plum, pear",
      "Copy this passage word for word:\n\nA small river runs past the old mill, and the "
      "mill wheel turns as the river runs."};
  return p;
}

GenerateRequest request(const std::string& user, float temp, int max_tokens, uint64_t seed) {
  GenerateRequest r;
  r.prompt = chat_prompt(user);
  r.params.temperature = temp;
  r.params.max_tokens = max_tokens;
  r.params.seed = seed;
  r.params.logprobs = true;
  r.params.top_logprobs = 2;
  return r;
}

LlmEngineOptions engine_options(int64_t max_batch_tokens = 8192) {
  LlmEngineOptions o;
  o.max_context = 1024;
  o.kv_rows = 8;
  o.max_batch_tokens = max_batch_tokens;
  return o;
}

SpeculativeConfig spec(SpecMethod m, int k = 4, int ngram_min = 2) {
  SpeculativeConfig c;
  c.method = m;
  c.num_tokens = k;
  c.ngram_min = ngram_min;
  c.ngram_max = 5;
  return c;
}

void expect_same(const GenerateResult& got, const GenerateResult& want, const std::string& what) {
  ASSERT_EQ(got.choices.size(), want.choices.size()) << what;
  for (size_t c = 0; c < want.choices.size(); ++c) {
    const ChoiceOutput& g = got.choices[c];
    const ChoiceOutput& w = want.choices[c];
    EXPECT_EQ(g.tokens, w.tokens) << what << " choice " << c;
    EXPECT_EQ(g.text, w.text) << what << " choice " << c;
    EXPECT_EQ(g.finish, w.finish) << what << " choice " << c;
    EXPECT_EQ(g.stop_index, w.stop_index) << what << " choice " << c;
    ASSERT_EQ(g.samples.size(), w.samples.size()) << what;
    for (size_t i = 0; i < w.samples.size(); ++i) {
      // The verify row's logits come from the same kernels in the same order (the parity
      // path is chunk-invariant), so the logprobs are equal, not merely close.
      EXPECT_EQ(g.samples[i].logprob, w.samples[i].logprob) << what << " token " << i;
      EXPECT_EQ(g.samples[i].rank, w.samples[i].rank) << what << " token " << i;
      ASSERT_EQ(g.samples[i].n_top, w.samples[i].n_top);
      for (int t = 0; t < w.samples[i].n_top; ++t)
        EXPECT_EQ(g.samples[i].top[size_t(t)].token, w.samples[i].top[size_t(t)].token);
    }
  }
  EXPECT_EQ(got.completion_tokens, want.completion_tokens) << what;
}

GenerateResult plain(const GenerateRequest& r) {
  LlmEngine e(trained().model, trained().tokenizer, engine_options());
  return e.generate(r);
}

struct SpecRun {
  std::vector<GenerateResult> results;
  LlmEngineStats stats;
};

// The requests submitted together to one engine with speculative decoding.
SpecRun run_spec(const std::vector<GenerateRequest>& reqs, const SpeculativeConfig& c,
                 int64_t max_batch_tokens = 8192) {
  LlmEngineOptions o = engine_options(max_batch_tokens);
  o.speculative = c;
  LlmEngine e(trained().model, trained().tokenizer, o, &trained().draft);
  SpecRun run;
  run.results = test::run_together(e, reqs);
  run.stats = e.stats();
  EXPECT_EQ(run.stats.kv.blocks_used, 0);  // every block given back (rollbacks included)
  return run;
}

class SpeculativeEngine : public ::testing::TestWithParam<SpecMethod> {};

TEST_P(SpeculativeEngine, GreedyEqualsPlainAloneAndInABatchOfEight) {
  std::vector<GenerateRequest> reqs;
  std::vector<GenerateResult> want;
  for (size_t i = 0; i < prompts().size(); ++i) {
    reqs.push_back(request(prompts()[i], 0.0f, 48, i));
    want.push_back(plain(reqs.back()));
  }
  const SpeculativeConfig c = spec(GetParam());
  uint64_t drafts = 0, accepted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {  // B = 1
    const SpecRun one = run_spec({reqs[i]}, c);
    expect_same(one.results[0], want[i], "alone " + std::to_string(i));
    drafts += one.stats.spec_draft_tokens;
    accepted += one.stats.spec_accepted_tokens;
  }
  const SpecRun all = run_spec(reqs, c);  // B = 8
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(all.results[i], want[i], "batched " + std::to_string(i));
  // The drafts were real work: many proposed, many accepted, fewer verify steps than tokens.
  uint64_t tokens = 0;
  for (const GenerateResult& r : want) tokens += uint64_t(r.completion_tokens);
  // (The model copies poorly, 27 % of its held-out copies are exact, so most drafts from
  // the prompt are rejected: 16 of 72 (ngram), 22 of 137 (suffix), 51 of 212 (draft) here.)
  EXPECT_GT(drafts, 40u);
  EXPECT_GE(accepted, 10u);
  EXPECT_GE(all.stats.spec_accepted_tokens, 10u);
  EXPECT_LT(all.stats.forwards + all.stats.spec_accepted_tokens / 2, tokens);
  std::cout << to_string(GetParam()) << ": " << accepted << " of " << drafts
            << " drafts accepted alone; batched " << all.stats.spec_accepted_tokens << " of "
            << all.stats.spec_draft_tokens << " in " << all.stats.forwards << " forwards for "
            << tokens << " tokens" << std::endl;
}

// Sampled: one-hot drafts (ngram, suffix) give the plain draws exactly. A draft model's
// sampled drafts go through the general rule, whose draws differ from plain decoding's (the
// distribution is the same: Verifier.GeneralRuleFollowsTheTargetDistribution); there a
// seeded request alone equals itself in a batch of eight.
TEST_P(SpeculativeEngine, SampledEqualsPlainDrawForDraw) {
  std::vector<GenerateRequest> reqs;
  std::vector<GenerateResult> want;
  for (size_t i = 0; i < prompts().size(); ++i) {
    GenerateRequest r = request(prompts()[i], 0.7f, 40, 100 + i);
    r.params.top_p = 0.9f;
    r.params.repetition_penalty = 1.1f;
    r.n = i % 3 == 0 ? 2 : 1;
    reqs.push_back(r);
    want.push_back(GetParam() == SpecMethod::draft ? run_spec({r}, spec(GetParam())).results[0]
                                                   : plain(r));
  }
  const SpecRun all = run_spec(reqs, spec(GetParam()));
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(all.results[i], want[i], "sampled " + std::to_string(i));
  EXPECT_GT(all.stats.spec_accepted_tokens, 10u);
}

TEST_P(SpeculativeEngine, StopStringsMaxTokensAndATightBudgetAsWithout) {
  std::vector<GenerateRequest> reqs;
  GenerateRequest r = request(prompts()[0], 0.0f, 48, 1);
  r.params.stop = {"violin"};  // mid-list: the drafts run past it
  reqs.push_back(r);
  r = request(prompts()[5], 0.0f, 9, 2);  // max_tokens inside an accepted run
  reqs.push_back(r);
  r = request(prompts()[7], 0.0f, 30, 3);
  r.params.stop_token_ids = {trained().tokenizer.encode(" river", false).at(0)};
  reqs.push_back(r);
  std::vector<GenerateResult> want;
  for (const GenerateRequest& q : reqs) want.push_back(plain(q));
  const SpecRun all = run_spec(reqs, spec(GetParam()));
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(all.results[i], want[i], "stops " + std::to_string(i));
  EXPECT_EQ(want[0].choices[0].finish, ChoiceFinish::stop);
  EXPECT_EQ(want[1].choices[0].finish, ChoiceFinish::length);
  // Three tokens an iteration for three requests: the drafts are cut to what fits.
  const SpecRun tight = run_spec(reqs, spec(GetParam()), 5);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(tight.results[i], want[i], "tight budget " + std::to_string(i));
}

TEST_P(SpeculativeEngine, ACancelledStreamStopsWhereItsCallbackSaid) {
  const GenerateRequest r = request(prompts()[0], 0.0f, 40, 1);
  const auto stop_after = [](int n) {
    return [n, seen = 0](int, std::string_view, const SampleResult&) mutable { return ++seen < n; };
  };
  LlmEngine base(trained().model, trained().tokenizer, engine_options());
  const GenerateResult want = base.generate(r, stop_after(6));
  LlmEngineOptions o = engine_options();
  o.speculative = spec(GetParam());
  LlmEngine e(trained().model, trained().tokenizer, o, &trained().draft);
  const GenerateResult got = e.generate(r, stop_after(6));
  EXPECT_EQ(got.choices[0].finish, ChoiceFinish::cancelled);
  expect_same(got, want, "cancelled");
  EXPECT_EQ(got.choices[0].tokens.size(), 6u);
  EXPECT_EQ(e.stats().kv.blocks_used, 0);
}

INSTANTIATE_TEST_SUITE_P(Methods, SpeculativeEngine,
                         ::testing::Values(SpecMethod::ngram, SpecMethod::suffix,
                                           SpecMethod::draft),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The mtp method on synthetic checkpoints with an MTP module in each layout (llm/mtp.h): every
// answer, greedy and sampled, equals its plain run (tokens, logprobs, top alternatives) alone
// and four together; the module drafts at every step after the prompt's; every block is given
// back. (Random weights: the drafts are almost all rejected; acceptance needs a trained head.)
TEST(SpeculativeEngine, MtpDraftsLeaveAnswersAsTheyWere) {
  test::TempDir dir("mtp_engine");
  const Tokenizer tok = Tokenizer::from_file(std::string(PARLEY_TEST_DATA) + "/llm/tokenizer.json");
  for (auto [shape, layout] : {std::pair{"tiny-qwen3", "deepseek_v3"}, {"tiny-qwen2", "mimo"}}) {
    LlmSynthOptions so;
    so.shape = shape;
    so.seed = 2;
    so.mtp = layout;
    const std::string folder = (dir.path() / layout).string();
    write_synth_llm(so, folder);
    const LlmModel m = LlmModel::load(folder);
    std::vector<GenerateRequest> reqs;
    for (int i = 0; i < 4; ++i) {
      GenerateRequest r;
      r.prompt = test::tokens(20 + 7 * i, i + 1, m.config().vocab_size);
      r.params.temperature = i % 2 ? 0.8f : 0.0f;
      r.params.seed = uint64_t(i);
      r.params.max_tokens = 24;
      r.params.logprobs = true;
      r.params.top_logprobs = 2;
      reqs.push_back(r);
    }
    std::vector<GenerateResult> want;
    {
      LlmEngine e(m, tok, engine_options());
      for (const GenerateRequest& r : reqs) want.push_back(e.generate(r));
    }
    LlmEngineOptions o = engine_options();
    o.speculative = spec(SpecMethod::mtp, 1);
    for (size_t i = 0; i < reqs.size(); ++i) {  // alone
      LlmEngine e(m, tok, o);
      expect_same(e.generate(reqs[i]), want[i],
                  std::string(layout) + " alone " + std::to_string(i));
      // Every decode step after the first carried the module's draft (or ended the answer).
      EXPECT_GE(e.stats().spec_draft_tokens + 1, uint64_t(want[i].completion_tokens) - 1) << layout;
      EXPECT_EQ(e.stats().kv.blocks_used, 0);
    }
    LlmEngine e(m, tok, o);  // together
    const std::vector<GenerateResult> got = test::run_together(e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      expect_same(got[i], want[i], std::string(layout) + " together " + std::to_string(i));
    EXPECT_GT(e.stats().spec_draft_tokens, 40u) << layout;
    EXPECT_EQ(e.stats().kv.blocks_used, 0);
    std::cout << layout << ": " << e.stats().spec_accepted_tokens << " of "
              << e.stats().spec_draft_tokens << " MTP drafts accepted (random weights)\n";
  }
  // A model without a module refuses the method.
  LlmEngineOptions o = engine_options();
  o.speculative = spec(SpecMethod::mtp, 1);
  EXPECT_THROW(LlmEngine(test::tiny_llama().model, test::tiny_llama().tokenizer, o), Error);
}

// A hand-made module that guesses "the next token repeats this one" (its projection passes
// the embedding through, its decoder layer adds nothing, its head is the embedding): a
// random model's greedy answers repeat a token now and then, and there these drafts are
// accepted. The
// accepted path (verify rows keeping several positions, the module run over them) leaves
// every answer as it was.
TEST(SpeculativeEngine, AcceptedMtpDraftsLeaveAnswersAsTheyWere) {
  test::TempDir dir("mtp_copy");
  const Tokenizer tok = Tokenizer::from_file(std::string(PARLEY_TEST_DATA) + "/llm/tokenizer.json");
  LlmSynthOptions so;
  so.shape = "tiny-qwen3";
  so.mtp = "deepseek_v3";
  write_synth_llm(so, (dir.path() / "m").string());
  const LlmModel loaded = LlmModel::load((dir.path() / "m").string());
  LlmWeights w = loaded.weights();
  MtpWeights& mt = w.mtp[0];
  const int64_t h = loaded.config().hidden_size;
  mt.proj_embed = Tensor::zeros({h, h}, DType::f32);
  for (int64_t i = 0; i < h; ++i) mt.proj_embed.data<float>()[i * h + i] = 1.0f;
  mt.proj_hidden = Tensor::zeros({h, h}, DType::f32);
  mt.block.o = Tensor::zeros(mt.block.o.shape(), DType::f32);
  mt.block.down = Tensor::zeros(mt.block.down.shape(), DType::f32);
  mt.final_norm = Tensor::empty({h}, DType::f32);
  std::fill_n(mt.final_norm.data<float>(), h, 1.0f);
  mt.head = w.embed;
  const LlmModel m(loaded.config(), w);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    GenerateRequest r;
    r.prompt = test::tokens(12 + 5 * i, 10 + i, m.config().vocab_size);
    r.params.temperature = 0;
    r.params.max_tokens = 40;
    r.params.logprobs = true;
    reqs.push_back(r);
  }
  LlmEngineOptions o = engine_options();
  LlmEngine plain(m, tok, o);
  o.speculative = spec(SpecMethod::mtp, 1);
  LlmEngine e(m, tok, o);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(e.generate(reqs[i]), plain.generate(reqs[i]), "copy head " + std::to_string(i));
  EXPECT_GT(e.stats().spec_accepted_tokens, 0u);  // 4 of 148 here: repeats are rare
  EXPECT_LT(e.stats().forwards, plain.stats().forwards);
  EXPECT_EQ(e.stats().kv.blocks_used, 0);
  std::cout << e.stats().spec_accepted_tokens << " of " << e.stats().spec_draft_tokens
            << " drafts accepted, " << e.stats().forwards << " forwards against "
            << plain.stats().forwards << "\n";
}

// disable_by_batch_size: no drafts while that many sequences decode together; drafts again
// once fewer are left; the answers as without speculation either way.
TEST(SpeculativeEngine, DisabledByBatchSizeDraftsOnlyWhileFewAreRunning) {
  std::vector<GenerateRequest> reqs;
  std::vector<GenerateResult> want;
  for (size_t i = 0; i < 4; ++i) {
    reqs.push_back(request(prompts()[i], 0.0f, 48, i));
    want.push_back(plain(reqs.back()));
  }
  SpeculativeConfig c = spec(SpecMethod::ngram);
  c.disable_by_batch_size = 100;  // never reached: drafts throughout
  const SpecRun free = run_spec(reqs, c);
  EXPECT_GT(free.stats.spec_draft_tokens, 0u);
  EXPECT_EQ(free.stats.spec_disabled_steps, 0u);
  c.disable_by_batch_size = 1;  // always reached: no drafts at all
  const SpecRun none = run_spec(reqs, c);
  EXPECT_EQ(none.stats.spec_draft_tokens, 0u);
  EXPECT_GT(none.stats.spec_disabled_steps, 0u);
  c.disable_by_batch_size = 2;  // drafts only for the last one running
  const SpecRun some = run_spec(reqs, c);
  EXPECT_GT(some.stats.spec_disabled_steps, 0u);
  EXPECT_LT(some.stats.spec_draft_tokens, free.stats.spec_draft_tokens);
  for (size_t i = 0; i < reqs.size(); ++i) {
    expect_same(free.results[i], want[i], "limit 100, " + std::to_string(i));
    expect_same(none.results[i], want[i], "limit 1, " + std::to_string(i));
    expect_same(some.results[i], want[i], "limit 2, " + std::to_string(i));
  }
  c.disable_by_batch_size = -1;
  EXPECT_THROW(validate(c), Error);
}

TEST(SpeculativeEngine, ARequestChoosesItsOwnMethodOrNone) {
  GenerateRequest r = request(prompts()[0], 0.0f, 40, 1);
  const GenerateResult want = plain(r);
  LlmEngineOptions o = engine_options();
  o.speculative = spec(SpecMethod::ngram);
  {
    LlmEngine e(trained().model, trained().tokenizer, o);
    r.speculative = SpeculativeConfig{};  // none for this request
    expect_same(e.generate(r), want, "none");
    EXPECT_EQ(e.stats().spec_rows, 0u);
  }
  {
    LlmEngine e(trained().model, trained().tokenizer, engine_options());
    r.speculative = spec(SpecMethod::ngram);
    expect_same(e.generate(r), want, "ngram");
    EXPECT_GT(e.stats().spec_accepted_tokens, 0u);
  }
}

}  // namespace
}  // namespace parley

namespace parley {
namespace {

TEST(SpeculativeEngine, TheDraftMethodNeedsADraftModelThatSharesTheVocabulary) {
  LlmEngineOptions o = engine_options();
  o.speculative = spec(SpecMethod::draft);
  EXPECT_THROW(LlmEngine(trained().model, trained().tokenizer, o), Error);
  LlmEngine plain_engine(trained().model, trained().tokenizer, engine_options());
  GenerateRequest r = request(prompts()[0], 0.0f, 8, 1);
  r.speculative = spec(SpecMethod::draft);
  EXPECT_THROW(plain_engine.submit(r, {}, {}), Error);
  test::TinyLlama& tiny = test::tiny_llama();  // the Qwen3 vocabulary, not the trained one's
  EXPECT_THROW(LlmEngine(trained().model, trained().tokenizer, engine_options(), &tiny.model),
               Error);
}

TEST(SpeculativeEngine, TheDraftModelsKvIsFreedWithItsRequestsAndARepeatGivesTheSameAnswer) {
  LlmEngineOptions o = engine_options();
  o.speculative = spec(SpecMethod::draft);
  LlmEngine e(trained().model, trained().tokenizer, o, &trained().draft);
  const GenerateRequest r = request(prompts()[2], 0.0f, 40, 1);
  const GenerateResult first = e.generate(r);
  const uint64_t draft_forwards = e.stats().draft_forwards;
  EXPECT_GT(draft_forwards, 10u);
  EXPECT_GT(first.accepted_draft_tokens, 10);
  // The same prompt again, its draft KV from the first run's cached blocks: the same answer.
  const GenerateResult again = e.generate(r);
  expect_same(again, first, "again");
  EXPECT_EQ(e.stats().kv.blocks_used, 0);
}

}  // namespace
}  // namespace parley
