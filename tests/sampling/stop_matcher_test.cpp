// StopMatcher against OpenAI's stop semantics: the stop string is cut with everything after
// it, across token boundaries, through partial matches that turn out not to be stops, with
// several stops (the earliest wins), and without splitting UTF-8 characters.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/error.h"
#include "sampling/stop_matcher.h"

namespace parley {
namespace {

// Pushes the pieces; returns what was emitted per push, then the flush as the last entry.
std::vector<std::string> run(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const std::string& p : pieces) out.push_back(m.push(p).emit);
  out.push_back(m.flush());
  return out;
}

TEST(StopMatcher, CutsAStopInsideOnePiece) {
  StopMatcher m({"STOP"});
  const StopMatcher::Step s = m.push("Hello STOP world");
  EXPECT_EQ(s.emit, "Hello ");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(m.stop_index(), 0);
  EXPECT_TRUE(m.push("more").stopped);
  EXPECT_EQ(m.push("more").emit, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FindsAStopAcrossTokenBoundaries) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(run(m, {"Hel", "lo S", "TO", "P and"}),
            (std::vector<std::string>{"Hel", "lo ", "", "", ""}));
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, ReleasesAPartialMatchThatIsNoStop) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(run(m, {"ST", "OR", "Y"}), (std::vector<std::string>{"", "STOR", "Y", ""}));
  EXPECT_FALSE(m.stopped());
  StopMatcher held({"STOP"});
  EXPECT_EQ(run(held, {"abST"}), (std::vector<std::string>{"ab", "ST"}));  // flush gives it back
}

TEST(StopMatcher, OverlappingPrefixes) {
  StopMatcher m({"aab"});
  EXPECT_EQ(run(m, {"aa", "aab"}), (std::vector<std::string>{"", "aa", ""}));
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, TheEarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo", "zzz"});
  const StopMatcher::Step s = m.push("hello world");
  EXPECT_EQ(s.emit, "hel");
  EXPECT_EQ(m.stop_index(), 1);
  StopMatcher same_start({"abc", "ab"});
  EXPECT_EQ(same_start.push("xabcd").emit, "x");
  EXPECT_EQ(same_start.stop_index(), 0);
  StopMatcher later_piece({"cd", "bcx"});  // "bcx" starts first, but only "cd" completes
  EXPECT_EQ(run(later_piece, {"ab", "cd"}), (std::vector<std::string>{"a", "b", ""}));
  EXPECT_EQ(later_piece.stop_index(), 0);
}

TEST(StopMatcher, NeverSplitsAUtf8Character) {
  StopMatcher plain;  // no stops: only the hold-back of unfinished characters
  EXPECT_EQ(run(plain, {"h\xC3", "\xA9llo", "\xF0\x9F", "\x98", "\x80x"}),
            (std::vector<std::string>{"h", "\xC3\xA9llo", "", "", "\xF0\x9F\x98\x80x", ""}));
  StopMatcher m({"\xC3\xA9!"});  // "é!"
  EXPECT_EQ(run(m, {"caf\xC3", "\xA9", "! more"}), (std::vector<std::string>{"caf", "", "", ""}));
  EXPECT_TRUE(m.stopped());
  StopMatcher miss(
      {"\xC3\xA9"
       "a"});
  EXPECT_EQ(run(miss, {"\xC3\xA9", "b"}), (std::vector<std::string>{"",
                                                                    "\xC3\xA9"
                                                                    "b",
                                                                    ""}));
  StopMatcher tail;  // a stream that ends inside a character gives the bytes at flush
  EXPECT_EQ(run(tail, {"a\xE2\x82"}), (std::vector<std::string>{"a", "\xE2\x82"}));
}

TEST(StopMatcher, AnySplitGivesTheTextBeforeTheEarliestStop) {
  std::mt19937 rng(5);
  const std::vector<std::string> stops{"abc", "cab", "bb"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int len = int(rng() % 30);
    for (int i = 0; i < len; ++i) text += char('a' + rng() % 3);
    size_t first = std::string::npos;
    for (const std::string& s : stops) first = std::min(first, text.find(s));
    const std::string want = first == std::string::npos ? text : text.substr(0, first);
    StopMatcher m(stops);
    std::string got;
    size_t pos = 0;
    while (pos < text.size() && !m.stopped()) {
      const size_t n = 1 + rng() % 4;
      got += m.push(text.substr(pos, n)).emit;
      pos += n;
    }
    got += m.flush();
    ASSERT_EQ(got, want) << "text " << text;
    ASSERT_EQ(m.stopped(), first != std::string::npos) << "text " << text;
  }
}

TEST(StopMatcher, RejectsBadStopLists) {
  EXPECT_THROW(StopMatcher({"a", "b", "c", "d", "e"}), Error);
  try {
    StopMatcher m({"a", ""});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("[stop]"), std::string::npos);
  }
}

}  // namespace
}  // namespace parley
