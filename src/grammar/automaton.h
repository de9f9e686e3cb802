// What a token constraint walks (grammar/constraint.h): an automaton over bytes whose states
// are small integers, built on demand. Regex (a DFA) and Grammar (a pushdown automaton's stack
// sets, interned) are the two kinds. Not thread-safe: states are created as they are reached.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace parley {

class ByteAutomaton {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;  // a transition not computed yet

  virtual ~ByteAutomaton() = default;
  virtual int32_t start() = 0;
  // The state after byte b from state s (kDead when nothing valid can continue).
  virtual int32_t step(int32_t s, uint8_t b) = 0;
  virtual bool accepting(int32_t s) = 0;  // the text so far is complete
  // State s's 256 cached transitions (kUnknown where step() has not computed one yet): the
  // mask walk reads them directly. Stays valid as states are added (entries only fill in).
  virtual const int32_t* transitions(int32_t s) = 0;
  // What errors name ("the pattern '...'", "the grammar").
  virtual const std::string& describe() const = 0;

  int32_t step(int32_t s, std::string_view bytes) {  // kDead as soon as one byte dies
    for (char c : bytes) {
      if (s == kDead) break;
      s = step(s, uint8_t(c));
    }
    return s;
  }
  bool full_match(std::string_view text) {
    const int32_t s = step(start(), text);
    return s != kDead && accepting(s);
  }
};

}  // namespace parley
