// Grammar-constrained generation in the engine (issue 27 item 3, regular expressions so far)
// on the trained model: every answer fully matches its pattern, greedy and sampled, at
// B = 1 and beside other requests; a pattern the model would follow anyway leaves its answer
// unchanged; n > 1 choices each keep their own automaton; a bad pattern is refused at submit.
#include <gtest/gtest.h>

#include "grammar/regex.h"
#include "serving/llm_engine.h"
#include "serving/serving_test_util.h"

namespace parley {
namespace {

test::TrainedChat& trained() { return test::trained_chat(); }

GenerateRequest ask(const std::string& user, const std::string& regex, float temp = 0,
                    int max_tokens = 48, uint64_t seed = 1) {
  GenerateRequest r;
  r.prompt = test::trained_chat_prompt(user);
  r.regex = regex;
  r.params.temperature = temp;
  r.params.max_tokens = max_tokens;
  r.params.seed = seed;
  return r;
}

LlmEngineOptions options() {
  LlmEngineOptions o;
  o.max_context = 1024;
  o.kv_rows = 8;
  return o;
}

bool matches(const std::string& regex, const std::string& text) {
  return Regex::compile(regex)->full_match(text);
}

TEST(ConstrainedEngine, AnswersMatchTheirPatternGreedyAndSampled) {
  LlmEngine e(trained().model, trained().tokenizer, options());
  struct Q {
    std::string user, regex;
  };
  const std::vector<Q> qs{
      {"What is 482 + 317?", "[0-9]+"},
      {"What is 482 + 317?", "The answer is [0-9]{3}\\."},  // not how it answers
      {"Is seven larger than three? Answer yes or no.", "(yes|no)"},
      {"Sort these words alphabetically: pear, apple, fig", "[a-z]+(, [a-z]+){2}"},
      {"Write a JSON object with a name and an age.",
       "\\{\"name\": \"[A-Za-z ]{1,20}\", \"age\": [0-9]{1,3}\\}"},
      {"Say something.", "[A-Z][a-z]{2,8}!"}};
  for (float temp : {0.0f, 0.9f}) {
    for (const Q& q : qs) {
      const GenerateResult r = e.generate(ask(q.user, q.regex, temp));
      const ChoiceOutput& c = r.choices[0];
      EXPECT_EQ(c.finish, ChoiceFinish::stop) << q.regex << " " << c.text;
      EXPECT_TRUE(matches(q.regex, c.text)) << q.regex << " gave '" << c.text << "'";
    }
  }
  // The model's own answer already matches: the constraint leaves it as it was.
  LlmEngine plain(trained().model, trained().tokenizer, options());
  GenerateRequest free = ask("What is 482 + 317?", "");
  const std::string want = plain.generate(free).choices[0].text;
  ASSERT_EQ(want, "799");
  EXPECT_EQ(e.generate(ask("What is 482 + 317?", "[0-9]+")).choices[0].text, want);
}

TEST(ConstrainedEngine, BatchedChoicesAndSpeculationKeepTheirOwnAutomata) {
  LlmEngineOptions o = options();
  o.speculative.method = SpecMethod::ngram;  // constrained requests decode without it
  LlmEngine e(trained().model, trained().tokenizer, o);
  std::vector<GenerateRequest> reqs{ask("What is 123 + 456?", "[0-9]{1,4}", 0.8f, 16, 3),
                                    ask("Name a color.", "(red|green|blue)", 0.8f, 16, 4),
                                    ask("What is 123 + 456?", "", 0.0f, 16, 5)};
  reqs[0].n = 3;
  std::vector<GenerateResult> out(reqs.size());
  int done = 0;
  for (size_t i = 0; i < reqs.size(); ++i)
    e.submit(reqs[i], {}, [&, i](GenerateResult* r, std::exception_ptr err) {
      if (err) std::rethrow_exception(err);
      out[i] = std::move(*r);
      ++done;
    });
  while (done < int(reqs.size())) ASSERT_TRUE(e.step());
  ASSERT_EQ(out[0].choices.size(), 3u);
  for (const ChoiceOutput& c : out[0].choices) EXPECT_TRUE(matches("[0-9]{1,4}", c.text)) << c.text;
  EXPECT_TRUE(matches("(red|green|blue)", out[1].choices[0].text)) << out[1].choices[0].text;
  EXPECT_EQ(out[2].choices[0].text, "579");  // the unconstrained request beside them
  EXPECT_EQ(out[0].draft_tokens + out[1].draft_tokens, 0);
}

TEST(ConstrainedEngine, ABadPatternIsRefusedAtSubmit) {
  LlmEngine e(trained().model, trained().tokenizer, options());
  EXPECT_THROW(e.submit(ask("hi", "(a"), {}, {}), Error);
  EXPECT_THROW(e.submit(ask("hi", "(?=a)"), {}, {}), Error);
  EXPECT_TRUE(e.idle());
}

}  // namespace
}  // namespace parley
