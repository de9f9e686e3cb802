// The realtime session's interim-text rule (next_delta): text goes out up to the last
// complete word of a hypothesis, only when it continues what was sent at a word boundary;
// the final transcript may complete it. Deltas never retract.
#include <gtest/gtest.h>

#include "server/realtime_session.h"

namespace parley::server {
namespace {

TEST(RealtimeDelta, InterimStopsAtTheLastCompleteWord) {
  EXPECT_EQ(next_delta("", "And so my fellow", false), "And so my");
  EXPECT_EQ(next_delta("And so my", "And so my fellow Americans, ask", false),
            " fellow Americans,");
  EXPECT_EQ(next_delta("", "And", false), "");  // one word may still change
}

TEST(RealtimeDelta, NothingWhenTheHypothesisDisagrees) {
  EXPECT_EQ(next_delta("And so my", "And so, my fellow Americans", false), "");
  EXPECT_EQ(next_delta("And so my", "And so mythical beasts", false), "");  // mid-word
  EXPECT_EQ(next_delta("And so my", "And so my", false), "");
  EXPECT_EQ(next_delta("And so my fellow", "And so my", false), "");  // shorter
}

TEST(RealtimeDelta, InterimTokenBudgetGrowsWithTheAudio) {
  EXPECT_EQ(interim_token_budget(16000), 42);      // 1 s, the first interim pass
  EXPECT_EQ(interim_token_budget(16000 * 5), 82);  // 5 s
  EXPECT_EQ(interim_token_budget(16000 * 19), 222);
  EXPECT_EQ(interim_token_budget(16000 * 30), 224);  // a window's usual limit
  EXPECT_EQ(interim_token_budget(16000 * 600), 224);
}

TEST(RealtimeDelta, FinalTakesTheRest) {
  EXPECT_EQ(next_delta("And so my", "And so my fellow Americans.", true), " fellow Americans.");
  EXPECT_EQ(next_delta("", "Ask.", true), "Ask.");
  EXPECT_EQ(next_delta("And so my", "And so, my fellow", true), "");  // held: completed says it
  EXPECT_EQ(next_delta("Ask", "Ask", true), "");
}

}  // namespace
}  // namespace parley::server

namespace parley::server {
namespace {

TEST(RealtimeDelta, AgreedWordsOfTwoHypotheses) {
  EXPECT_EQ(agreed_words("And so my fellow", "And so my fellow Americans"), "And so my fellow");
  EXPECT_EQ(agreed_words("And so my fell", "And so my fellow"), "And so my");
  EXPECT_EQ(agreed_words("Why'd you all", "And so my"), "");
  EXPECT_EQ(agreed_words("", "And so"), "");
  EXPECT_EQ(agreed_words("And so, my", "And so my"), "And");
}

}  // namespace
}  // namespace parley::server
