// A regular expression over UTF-8 bytes, compiled to a DFA (issue 27 item 3, the first
// piece of the grammar engine): what the `regex` request field constrains an answer to, the
// whole answer matching (fullmatch). Built from scratch: a parser of the common syntax into
// a Thompson NFA over byte ranges, then subset construction on demand (a DFA state is a set
// of NFA states; its 256 transitions are computed the first time a byte leaves it and kept).
//
// Syntax: literals, `.` (any character but newline), classes `[a-z0-9_]`, `[^...]`, with
// escapes `\d \w \s \D \W \S` (ASCII meanings) inside and outside them, `\.`-style escapes of
// punctuation, `\n \t \r \f \v \0 \xHH \uHHHH`, groups `( )` and `(?: )`, alternation `|`,
// quantifiers `* + ? {n} {n,} {n,m}` (lazy `?` suffixes accepted: for a whole-answer match
// they change nothing), `^` at the start and `$` at the end (a full match anyway). A
// character is UTF-8: non-ASCII literals are their byte sequences, `.` and negated classes
// also match any multi-byte character, a class may list non-ASCII characters (not ranges of
// them). Unsupported (an Error naming it and the position): backreferences, lookaround,
// anchors elsewhere, word boundaries, non-ASCII class ranges.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/automaton.h"

namespace parley {

class Regex : public ByteAutomaton {
 public:
  // Throws Error(invalid_argument) for a syntax error or an unsupported construct, with the
  // 0-based position in the pattern.
  static std::shared_ptr<Regex> compile(std::string_view pattern);

  const std::string& pattern() const { return pattern_; }
  int32_t start() override { return 0; }  // the DFA's start state
  int32_t step(int32_t s, uint8_t b) override;
  using ByteAutomaton::step;
  bool accepting(int32_t s) override;  // a match may end here
  const int32_t* transitions(int32_t s) override { return dfa_[size_t(s)].next.data(); }
  const std::string& describe() const override { return describe_; }
  // No byte leads on (so only the end of the answer is allowed, when accepting).
  bool final(int32_t s);

 private:
  struct Edge {
    uint8_t lo, hi;
    int32_t to;
  };
  struct NfaState {
    std::vector<Edge> edges;   // byte-range transitions
    std::vector<int32_t> eps;  // epsilon transitions
  };
  struct DfaState {
    std::vector<int32_t> nfa;  // sorted NFA states (epsilon-closed)
    bool accepting = false;
    bool final_known = false, final = false;
    std::vector<int32_t> next;  // 256 entries, -2: not computed yet
  };
  friend class RegexParser;
  int32_t add_nfa_state();
  int32_t intern(std::vector<int32_t> set);  // the DFA state of an NFA state set

  std::string pattern_, describe_;
  std::vector<NfaState> nfa_;
  int32_t nfa_start_ = 0, nfa_accept_ = 0;
  std::vector<DfaState> dfa_;
  std::vector<std::pair<std::vector<int32_t>, int32_t>> index_;  // set -> DFA state (sorted)
};

}  // namespace parley
