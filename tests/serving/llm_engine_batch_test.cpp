// LlmEngine's continuous batching on a synthetic tiny-llama (CPU), real B > 1 work: requests
// submitted together, arriving during another's prefill or decode, with unequal lengths,
// sampled and greedy, n > 1, preempted when the KV blocks run out, cancelled mid-prefill.
// Each request's tokens and logprobs equal its run alone on a fresh engine (the parity path
// is batch- and chunk-invariant, so equality is exact), and the batch really is shared
// (fewer forwards than the runs alone, rows of several requests in one iteration).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "serving/llm_engine.h"
#include "serving/serving_test_util.h"

namespace parley {
namespace {

test::TinyLlama& tiny() { return test::tiny_llama(); }

int64_t vocab() { return tiny().model.config().vocab_size; }

GenerateRequest request(int64_t prompt_len, int32_t seed, int max_tokens, float temp = 0,
                        int n = 1) {
  GenerateRequest r;
  r.prompt = test::tokens(prompt_len, seed, vocab());
  r.params.max_tokens = max_tokens;
  r.params.temperature = temp;
  r.params.seed = uint64_t(seed);
  r.params.logprobs = true;
  r.params.ignore_eos = true;  // every request runs to max_tokens: lengths as planned
  r.n = n;
  return r;
}

LlmEngineOptions options(int64_t max_batch_tokens = 8192, int max_running = 8, bool mixed = true) {
  LlmEngineOptions o;
  o.max_context = 256;
  o.kv_rows = 8;
  o.max_batch_tokens = max_batch_tokens;
  o.max_running = max_running;
  o.mixed_prefill = mixed;
  return o;
}

struct Alone {
  GenerateResult result;
  uint64_t forwards = 0;
};

Alone alone(const GenerateRequest& r) {
  LlmEngine fresh(tiny().model, tiny().tokenizer, options());
  Alone a;
  a.result = fresh.generate(r);
  a.forwards = fresh.stats().forwards;
  return a;
}

void expect_same(const GenerateResult& got, const GenerateResult& want, const std::string& what) {
  ASSERT_EQ(got.choices.size(), want.choices.size()) << what;
  for (size_t c = 0; c < want.choices.size(); ++c) {
    EXPECT_EQ(got.choices[c].tokens, want.choices[c].tokens) << what << " choice " << c;
    EXPECT_EQ(got.choices[c].text, want.choices[c].text) << what << " choice " << c;
    EXPECT_EQ(got.choices[c].finish, want.choices[c].finish) << what << " choice " << c;
    ASSERT_EQ(got.choices[c].samples.size(), want.choices[c].samples.size()) << what;
    for (size_t i = 0; i < want.choices[c].samples.size(); ++i)
      EXPECT_EQ(got.choices[c].samples[i].logprob, want.choices[c].samples[i].logprob)
          << what << " choice " << c << " token " << i;
  }
  EXPECT_EQ(got.completion_tokens, want.completion_tokens) << what;
}

// A request in flight: its result lands here.
struct Slot {
  std::optional<GenerateResult> result;
  std::exception_ptr error;
  bool done = false;
  int tokens_seen = 0;
};

void submit(LlmEngine& engine, const GenerateRequest& r, Slot& slot,
            std::shared_ptr<const std::atomic<bool>> cancel = nullptr) {
  engine.submit(
      r,
      [&slot](int, std::string_view, const SampleResult&) {
        ++slot.tokens_seen;
        return true;
      },
      [&slot](GenerateResult* res, std::exception_ptr e) {
        if (res) slot.result = std::move(*res);
        slot.error = e;
        slot.done = true;
      },
      std::move(cancel));
}

// Steps until idle; returns the most requests that shared one iteration.
int64_t run_to_idle(LlmEngine& engine) {
  int64_t most = 0;
  for (int guard = 0; guard < 100000 && !engine.idle(); ++guard) {
    most = std::max(most, engine.stats().scheduler.running);
    engine.step();
  }
  EXPECT_TRUE(engine.idle());
  return most;
}

std::vector<GenerateRequest> mixed_requests() {
  return {request(7, 1, 12),        request(120, 2, 5),
          request(33, 3, 20, 0.8f), request(64, 4, 9, 1.0f, /*n=*/2),
          request(16, 5, 1),        request(90, 6, 16, 0.6f)};
}

class LlmEngineBatch : public testing::TestWithParam<bool> {};  // mixed prefill on / off

TEST_P(LlmEngineBatch, ConcurrentRequestsMatchTheirRunsAlone) {
  const auto reqs = mixed_requests();
  LlmEngine engine(tiny().model, tiny().tokenizer, options(8192, 8, GetParam()));
  std::vector<Slot> slots(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) submit(engine, reqs[i], slots[i]);
  const int64_t most = run_to_idle(engine);
  // All six ran in the first iteration; the one-token request ended in it, five went on.
  EXPECT_EQ(most, int64_t(reqs.size()) - 1);
  uint64_t forwards_alone = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(slots[i].done && !slots[i].error) << i;
    const Alone a = alone(reqs[i]);
    forwards_alone += a.forwards;
    expect_same(*slots[i].result, a.result, "request " + std::to_string(i));
  }
  EXPECT_LT(engine.stats().forwards, forwards_alone / 3);
  EXPECT_EQ(engine.kv_stats().blocks_used, 0);
}

TEST_P(LlmEngineBatch, ArrivalsDuringPrefillAndDecode) {
  // A 32-token budget: a 100-token prompt takes several iterations of prefill.
  LlmEngine engine(tiny().model, tiny().tokenizer, options(32, 8, GetParam()));
  const GenerateRequest a = request(100, 11, 10), b = request(50, 12, 12, 0.9f),
                        c = request(20, 13, 6);
  Slot sa, sb, sc;
  submit(engine, a, sa);
  engine.step();
  engine.step();  // a is mid-prefill (64 of 100)
  submit(engine, b, sb);
  while (sa.tokens_seen < 3) engine.step();  // a decodes, b prefills beside it
  submit(engine, c, sc);
  run_to_idle(engine);
  for (auto [slot, req, name] : {std::tuple{&sa, &a, "a"}, {&sb, &b, "b"}, {&sc, &c, "c"}}) {
    ASSERT_TRUE(slot->done && !slot->error) << name;
    expect_same(*slot->result, alone(*req).result, name);
  }
  EXPECT_GT(sb.result->timings.first_token_ms, 0);
}

TEST_P(LlmEngineBatch, PreemptionRecomputesAndLosesNothing) {
  // 16 blocks (2 rows of 128 tokens); five requests of 20 + 40 tokens need 4 blocks each at
  // the end: they start together (2 blocks each) and the newest are preempted as they grow.
  LlmEngineOptions o = options(8192, 8, GetParam());
  o.max_context = 128;
  o.kv_rows = 2;
  LlmEngine engine(tiny().model, tiny().tokenizer, o);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back(request(20, 20 + i, 40, i % 2 ? 0.7f : 0.0f));
  std::vector<Slot> slots(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) submit(engine, reqs[i], slots[i]);
  run_to_idle(engine);
  EXPECT_GT(engine.stats().scheduler.preemptions, 0u);
  int preempted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(slots[i].done && !slots[i].error) << i;
    expect_same(*slots[i].result, alone(reqs[i]).result, "request " + std::to_string(i));
    EXPECT_EQ(slots[i].tokens_seen, 40) << "request " << i << ": a token streamed twice";
    preempted += slots[i].result->timings.preemptions;
  }
  EXPECT_EQ(uint64_t(preempted), engine.stats().scheduler.preemptions);
  EXPECT_EQ(slots[0].result->timings.preemptions, 0);  // the oldest is never the victim
  EXPECT_EQ(engine.kv_stats().blocks_used, 0);
}

INSTANTIATE_TEST_SUITE_P(Mixed, LlmEngineBatch, testing::Bool(),
                         [](const auto& info) { return info.param ? "mixed" : "separate"; });

TEST(LlmEngineBatchLifecycle, CancellationMidPrefillFreesItsBlocksAndSparesTheOthers) {
  LlmEngine engine(tiny().model, tiny().tokenizer, options(24));
  const GenerateRequest a = request(150, 31, 8), b = request(10, 32, 8);
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  Slot sa, sb;
  submit(engine, a, sa, cancel);
  submit(engine, b, sb);
  engine.step();
  engine.step();  // a is mid-prefill
  EXPECT_GT(engine.kv_stats().blocks_used, 0);
  cancel->store(true);
  engine.step();
  ASSERT_TRUE(sa.done);
  ASSERT_TRUE(sa.result.has_value());
  EXPECT_EQ(sa.result->choices[0].finish, ChoiceFinish::cancelled);
  EXPECT_TRUE(sa.result->choices[0].tokens.empty());
  run_to_idle(engine);
  expect_same(*sb.result, alone(b).result, "b");
  EXPECT_EQ(engine.kv_stats().blocks_used, 0);
}

TEST(LlmEngineBatchLifecycle, ACallbackThatSaysStopCancelsOnlyItsRequest) {
  LlmEngine engine(tiny().model, tiny().tokenizer, options());
  const GenerateRequest a = request(12, 41, 30, 0, /*n=*/2), b = request(12, 42, 10);
  Slot sa, sb;
  int seen = 0;
  engine.submit(
      a, [&](int, std::string_view, const SampleResult&) { return ++seen < 5; },
      [&](GenerateResult* r, std::exception_ptr) {
        sa.result = std::move(*r);
        sa.done = true;
      });
  submit(engine, b, sb);
  run_to_idle(engine);
  ASSERT_TRUE(sa.done);
  for (const auto& c : sa.result->choices) {
    EXPECT_EQ(c.finish, ChoiceFinish::cancelled);
    EXPECT_LE(c.tokens.size(), 3u);
  }
  expect_same(*sb.result, alone(b).result, "b");
}

TEST(LlmEngineBatchLifecycle, MaxRunningOneRunsRequestsOneAfterAnother) {
  LlmEngine engine(tiny().model, tiny().tokenizer, options(8192, /*max_running=*/1));
  const auto reqs = mixed_requests();
  std::vector<Slot> slots(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) submit(engine, reqs[i], slots[i]);
  EXPECT_EQ(run_to_idle(engine), 1);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(*slots[i].result, alone(reqs[i]).result, "request " + std::to_string(i));
  // Queued behind the others, the last one waited.
  EXPECT_GT(slots.back().result->timings.queue_ms, 0);
}

TEST(LlmEngineBatchLifecycle, ARequestThatCannotFitAloneIsRefusedAtSubmit) {
  LlmEngineOptions o = options();
  o.max_context = 128;
  o.kv_rows = 1;  // 8 blocks
  LlmEngine engine(tiny().model, tiny().tokenizer, o);
  Slot s;
  try {
    submit(engine, request(20, 1, 100, 0, /*n=*/2), s);  // 2 x 8 blocks
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::resource_exhausted);
  }
  EXPECT_TRUE(engine.idle());
}

TEST(LlmEngineBatchLifecycle, TraceHasEveryIterationsSpansWithTheirRows) {
  test::TempDir dir("engine_trace");
  const std::string path = (dir.path() / "trace.json").string();
  uint64_t iterations = 0;
  {
    LlmEngineOptions o = options();
    o.trace_path = path;
    LlmEngine engine(tiny().model, tiny().tokenizer, o);
    Slot a, b;
    submit(engine, request(30, 51, 4), a);
    submit(engine, request(20, 52, 6), b);
    run_to_idle(engine);
    iterations = engine.stats().scheduler.iterations;
    EXPECT_GT(engine.stats().forward_seconds, 0);
    EXPECT_GE(engine.stats().busy_seconds, engine.stats().forward_seconds);
  }
  std::ifstream in(path);
  const auto events = nlohmann::json::parse(in);  // whole JSON once the engine is gone
  std::map<std::string, int> count;
  int most_rows = 0;
  for (const auto& e : events) {
    EXPECT_EQ(e["ph"], "X");
    EXPECT_GE(e["dur"].get<double>(), 0);
    ++count[e["name"].get<std::string>()];
    if (e["name"] == "forward") most_rows = std::max(most_rows, e["args"]["rows"].get<int>());
  }
  EXPECT_EQ(uint64_t(count["iteration"]), iterations);
  EXPECT_EQ(uint64_t(count["schedule"]), iterations);
  EXPECT_EQ(uint64_t(count["forward"]), iterations);  // mixed prefill: one per iteration
  EXPECT_EQ(uint64_t(count["sample"]), iterations);
  EXPECT_EQ(most_rows, 2);
}

}  // namespace
}  // namespace parley
