// LlmEngine over the KV pool on a synthetic tiny-llama (CPU): a prompt sharing a cached
// prefix computes only its new tokens and gives the same tokens and logprobs as a run
// without the cache (the parity path is batch- and chunk-invariant, so equality is exact);
// a follow-up turn reuses the previous answer; n choices fork the prompt's blocks; the SSD
// tier carries the cache across a restart.
#include <gtest/gtest.h>

#include <filesystem>

#include "serving/llm_engine.h"
#include "serving/serving_test_util.h"

namespace parley {
namespace {

test::TinyLlama& tiny() { return test::tiny_llama(); }

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

GenerateRequest request(std::vector<int32_t> prompt, int max_tokens, int n = 1, float temp = 0) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.params.max_tokens = max_tokens;
  r.params.temperature = temp;
  r.params.seed = 7;
  r.params.logprobs = true;
  r.n = n;
  return r;
}

LlmEngineOptions options(std::string dir = {}) {
  LlmEngineOptions o;
  o.max_context = 512;
  o.kv_rows = 2;
  o.kv_cache_dir = std::move(dir);
  return o;
}

// The same request on a fresh engine (an empty cache).
GenerateResult uncached(const GenerateRequest& r) {
  LlmEngine fresh(tiny().model, tiny().tokenizer, options());
  GenerateResult out = fresh.generate(r);
  EXPECT_EQ(out.cached_tokens, 0);
  return out;
}

void expect_same(const GenerateResult& a, const GenerateResult& b) {
  ASSERT_EQ(a.choices.size(), b.choices.size());
  for (size_t c = 0; c < a.choices.size(); ++c) {
    EXPECT_EQ(a.choices[c].tokens, b.choices[c].tokens) << "choice " << c;
    ASSERT_EQ(a.choices[c].samples.size(), b.choices[c].samples.size());
    for (size_t i = 0; i < a.choices[c].samples.size(); ++i)
      EXPECT_EQ(a.choices[c].samples[i].logprob, b.choices[c].samples[i].logprob)
          << "choice " << c << " token " << i;
  }
}

TEST(LlmEngineCache, SharedPrefixSkipsItsPrefillWithIdenticalOutput) {
  const int64_t vocab = tiny().model.config().vocab_size;
  const std::vector<int32_t> prefix = test::tokens(100, 1, vocab);
  LlmEngine engine(tiny().model, tiny().tokenizer, options());

  const GenerateRequest first = request(cat(prefix, test::tokens(7, 2, vocab)), 8);
  const GenerateResult a = engine.generate(first);
  EXPECT_EQ(a.cached_tokens, 0);
  expect_same(a, uncached(first));

  const GenerateRequest second = request(cat(prefix, test::tokens(9, 3, vocab)), 8);
  const GenerateResult b = engine.generate(second);
  EXPECT_EQ(b.cached_tokens, 96);  // the prefix's six full blocks; 13 tokens computed
  expect_same(b, uncached(second));

  // A follow-up turn: the first prompt, its answer and a new message. The answer's blocks
  // were published: 107 + 8 tokens (fewer at an EOS), the last not run through the model.
  const GenerateRequest follow =
      request(cat(cat(first.prompt, a.choices[0].tokens), test::tokens(20, 4, vocab)), 6);
  const GenerateResult c = engine.generate(follow);
  const int64_t answered = int64_t(first.prompt.size() + a.choices[0].tokens.size()) - 1;
  EXPECT_EQ(c.cached_tokens, answered / 16 * 16);  // 112 for a full answer
  EXPECT_GT(c.cached_tokens, 96);
  expect_same(c, uncached(follow));

  // Another cache_salt shares nothing.
  GenerateRequest salted = second;
  salted.cache_salt = "tenant-b";
  const GenerateResult d = engine.generate(salted);
  EXPECT_EQ(d.cached_tokens, 0);
  expect_same(d, b);

  const KvPoolStats s = engine.kv_stats();
  EXPECT_EQ(s.hit_tokens, 96 + c.cached_tokens);
  EXPECT_EQ(s.blocks_used, 0);
}

TEST(LlmEngineCache, ChoicesForkThePromptBlocks) {
  const int64_t vocab = tiny().model.config().vocab_size;
  LlmEngine engine(tiny().model, tiny().tokenizer, options());
  const GenerateRequest r = request(test::tokens(40, 5, vocab), 10, /*n=*/3, /*temp=*/1.0f);
  const GenerateResult a = engine.generate(r);
  expect_same(a, uncached(r));
  EXPECT_EQ(engine.kv_stats().cow_copies, 2);  // choices 1 and 2 copy the partial block
  ASSERT_EQ(a.choices.size(), 3u);
  EXPECT_NE(a.choices[0].tokens, a.choices[1].tokens);  // their own random streams
}

TEST(LlmEngineCache, SsdTierAcrossARestart) {
  test::TempDir dir("kv_engine_ssd");
  const std::string kv_dir = (dir.path() / "kv").string();
  const int64_t vocab = tiny().model.config().vocab_size;
  const std::vector<int32_t> prefix = test::tokens(100, 6, vocab);
  {
    LlmEngine engine(tiny().model, tiny().tokenizer, options(kv_dir));
    EXPECT_EQ(engine.generate(request(cat(prefix, test::tokens(5, 7, vocab)), 4)).cached_tokens, 0);
  }  // written at shutdown
  LlmEngine engine(tiny().model, tiny().tokenizer, options(kv_dir));
  EXPECT_GE(engine.kv_tier_stats().ssd_blocks, 6);
  const GenerateRequest second = request(cat(prefix, test::tokens(9, 8, vocab)), 8);
  const GenerateResult b = engine.generate(second);
  EXPECT_EQ(b.cached_tokens, 96);
  EXPECT_EQ(engine.kv_tier_stats().ssd_hits, 6);
  expect_same(b, uncached(second));
}

}  // namespace
}  // namespace parley
