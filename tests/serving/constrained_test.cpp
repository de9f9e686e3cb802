// Grammar-constrained generation in the engine (issue 27 item 3) on the trained model: every
// answer fully matches its pattern, greedy and sampled, at B = 1 and beside other requests;
// a pattern the model would follow anyway leaves its answer unchanged; n > 1 choices each
// keep their own automaton; a bad pattern is refused at submit; JSON Schema, json_object and
// GBNF answers parse and hold to their schema.
#include <gtest/gtest.h>

#include <algorithm>

#include "grammar/regex.h"
#include "io/json_lite.h"
#include "serving/llm_engine.h"
#include "serving/serving_test_util.h"

namespace parley {
namespace {

test::TrainedChat& trained() { return test::trained_chat(); }

GenerateRequest ask(const std::string& user, const std::string& regex, float temp = 0,
                    int max_tokens = 48, uint64_t seed = 1) {
  GenerateRequest r;
  r.prompt = test::trained_chat_prompt(user);
  if (!regex.empty()) r.grammar = {GrammarSpec::Kind::regex, regex};
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
  std::vector<GenerateRequest> reqs{ask("What is 123 + 456?", "[0-9]{1,4}", 0.8f, 16, 3),
                                    ask("Name a color.", "(red|green|blue)", 0.8f, 16, 4),
                                    ask("What is 123 + 456?", "", 0.0f, 16, 5)};
  reqs[0].n = 3;
  // Masks computed in the sampler, then beside the forward pass (MaskPrefetch; automatic
  // leaves it off on the CPU): the same answers, seeds and all.
  std::vector<std::vector<GenerateResult>> runs;
  for (auto overlap : {LlmEngineOptions::MaskOverlap::off, LlmEngineOptions::MaskOverlap::on}) {
    LlmEngineOptions o = options();
    o.speculative.method = SpecMethod::ngram;
    o.mask_overlap = overlap;
    LlmEngine e(trained().model, trained().tokenizer, o);
    const std::vector<GenerateResult> out = test::run_together(e, reqs);
    ASSERT_EQ(out[0].choices.size(), 3u);
    for (const ChoiceOutput& c : out[0].choices)
      EXPECT_TRUE(matches("[0-9]{1,4}", c.text)) << c.text;
    EXPECT_TRUE(matches("(red|green|blue)", out[1].choices[0].text)) << out[1].choices[0].text;
    EXPECT_EQ(out[2].choices[0].text, "579");  // the unconstrained request beside them
    EXPECT_EQ(e.stats().prefetched_masks > 0, overlap == LlmEngineOptions::MaskOverlap::on);
    runs.push_back(out);
  }
  for (size_t i = 0; i < reqs.size(); ++i)
    for (size_t c = 0; c < runs[0][i].choices.size(); ++c)
      EXPECT_EQ(runs[0][i].choices[c].tokens, runs[1][i].choices[c].tokens) << i << " " << c;
}

// The trained model's JSON task (tools/train/data.py ep_json): fill in an object for a schema.
std::string json_task(const std::string& schema, const std::string& description) {
  return "Fill in a JSON object that matches this schema:\n" + schema + "\n\n" + description +
         "\nAnswer with the JSON only.";
}

size_t characters(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char b) { return (b & 0xC0) != 0x80; }));
}

TEST(ConstrainedEngine, JsonSchemaJsonObjectAndGbnfAnswers) {
  const std::string schema =
      R"({"type": "object", "properties": {"name": {"type": "string"}, )"
      R"("age": {"type": "integer"}, "city": {"type": "string"}}, )"
      R"("required": ["name", "age", "city"], "additionalProperties": false})";
  const std::string user =
      json_task(schema, "A person: the city is Lisbon; the name is Ada Lovelace; the age is 36.");
  LlmEngine plain(trained().model, trained().tokenizer, options());
  const std::string natural = plain.generate(ask(user, "", 0.0f, 96)).choices[0].text;
  // The model's own answer is already valid (its name for the person is its own).
  ASSERT_EQ(io::json::parse(natural, "answer").as_object().size(), 3u) << natural;
  ASSERT_NE(natural.find(R"("age": 36, "city": "Lisbon"})"), std::string::npos) << natural;
  // Under its own schema, json_object, and a tighter schema (bounds the model must bend to),
  // with and without the forced drafts, greedy and sampled: valid answers; greedy and
  // the loose grammars leave the natural answer as it was.
  const std::string tight = R"({"type": "object", "additionalProperties": false,
    "required": ["name", "age"],
    "properties": {"name": {"type": "string", "maxLength": 8},
                   "age": {"type": "integer", "minimum": 40, "maximum": 99}}})";
  for (bool forced : {true, false}) {
    LlmEngineOptions o = options();
    o.forced_drafts = forced;
    LlmEngine e(trained().model, trained().tokenizer, o);
    GenerateRequest r = ask(user, "", 0.0f, 96);
    r.grammar = {GrammarSpec::Kind::json_schema, schema};
    GenerateResult own = e.generate(r);
    EXPECT_EQ(own.choices[0].text, natural);
    EXPECT_EQ(own.forced_draft_tokens > 0, forced);
    r.grammar = {GrammarSpec::Kind::json_object, "{}"};
    EXPECT_EQ(e.generate(r).choices[0].text, natural);
    for (float temp : {0.0f, 1.0f}) {
      for (uint64_t seed : {1, 2}) {
        GenerateRequest t = ask(user, "", temp, 96, seed);
        t.grammar = {GrammarSpec::Kind::json_schema, tight};
        const ChoiceOutput c = e.generate(t).choices[0];
        ASSERT_EQ(c.finish, ChoiceFinish::stop) << c.text;
        const io::json::Value doc = io::json::parse(c.text, "answer");
        ASSERT_EQ(doc.as_object().size(), 2u) << c.text;
        EXPECT_EQ(doc.as_object()[0].first, "name");
        EXPECT_LE(characters(doc.find("name")->as_string()), 8u) << c.text;
        const auto age = doc.find("age")->as_int64();
        ASSERT_TRUE(age) << c.text;
        EXPECT_GE(*age, 40);
        EXPECT_LE(*age, 99);
      }
    }
  }
  // GBNF.
  LlmEngine e(trained().model, trained().tokenizer, options());
  GenerateRequest g = ask("Is seven larger than three? Answer yes or no.", "", 0.0f, 16);
  g.grammar = {GrammarSpec::Kind::gbnf, R"g(root ::= ("yes" | "no") "." )g"};
  const std::string yn = e.generate(g).choices[0].text;
  EXPECT_TRUE(yn == "yes." || yn == "no.") << yn;
}

// Forced drafts change nothing but the number of forwards: greedy and seeded sampled answers,
// logprobs included, equal those decoded one token at a time, at B = 1 and B = 4.
TEST(ConstrainedEngine, ForcedDraftsLeaveAnswersAsTheyWere) {
  const std::string schema =
      R"({"type": "object", "properties": {"title": {"type": "string"}, )"
      R"("year": {"type": "integer"}, "genre": {"type": "string", )"
      R"("enum": ["fiction", "history", "science", "poetry"]}}, )"
      R"("required": ["title", "year", "genre"], "additionalProperties": false})";
  std::vector<GenerateRequest> reqs;
  const char* descriptions[] = {
      "A book: the title is The Quiet Harbor; the year is 1952; the genre is fiction.",
      "A book: the genre is history; the year is 2001; the title is The Red Window.",
      "A book: the title is Small Hours; the genre is poetry; the year is 1899.",
      "A book: the year is 1977; the title is The Last River; the genre is science."};
  for (int i = 0; i < 4; ++i) {
    GenerateRequest r =
        ask(json_task(schema, descriptions[i]), "", i % 2 ? 0.8f : 0.0f, 96, uint64_t(10 + i));
    r.grammar = {GrammarSpec::Kind::json_schema, schema};
    r.params.logprobs = true;
    r.params.top_logprobs = 2;
    reqs.push_back(r);
  }
  auto run = [&](bool forced, bool batched, bool overlap = false) {
    LlmEngineOptions o = options();
    o.forced_drafts = forced;
    o.mask_overlap =
        overlap ? LlmEngineOptions::MaskOverlap::on : LlmEngineOptions::MaskOverlap::off;
    LlmEngine e(trained().model, trained().tokenizer, o);
    std::vector<GenerateResult> out(reqs.size());
    if (!batched) {
      for (size_t i = 0; i < reqs.size(); ++i) out[i] = e.generate(reqs[i]);
      return out;
    }
    return test::run_together(e, reqs);
  };
  const auto base = run(false, false);
  // Alone, together, and together with the masks computed beside the forward pass.
  for (auto [batched, overlap] : {std::pair{false, false}, {true, false}, {true, true}}) {
    const auto got = run(true, batched, overlap);
    int64_t forced = 0, accepted = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const ChoiceOutput &a = base[i].choices[0], &b = got[i].choices[0];
      EXPECT_EQ(a.tokens, b.tokens) << i << ": " << a.text << " vs " << b.text;
      ASSERT_EQ(a.samples.size(), b.samples.size());
      for (size_t k = 0; k < a.samples.size(); ++k) {
        EXPECT_FLOAT_EQ(a.samples[k].logprob, b.samples[k].logprob);
        ASSERT_EQ(a.samples[k].n_top, b.samples[k].n_top);
        for (int j = 0; j < a.samples[k].n_top; ++j)
          EXPECT_EQ(a.samples[k].top[size_t(j)].token, b.samples[k].top[size_t(j)].token);
      }
      forced += got[i].forced_draft_tokens;
      accepted += got[i].accepted_draft_tokens;
      EXPECT_TRUE(io::json::parse(b.text, "answer").is(io::json::Value::Kind::object)) << b.text;
    }
    EXPECT_GT(forced, 20);    // the keys and their punctuation
    EXPECT_GT(accepted, 10);  // most of them as the model would write them anyway
  }
}

TEST(ConstrainedEngine, ABadPatternIsRefusedAtSubmit) {
  LlmEngine e(trained().model, trained().tokenizer, options());
  EXPECT_THROW(e.submit(ask("hi", "(a"), {}, {}), Error);
  EXPECT_THROW(e.submit(ask("hi", "(?=a)"), {}, {}), Error);
  EXPECT_TRUE(e.idle());
}

}  // namespace
}  // namespace parley
