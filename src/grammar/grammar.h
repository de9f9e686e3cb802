// A context-free grammar over UTF-8 bytes (issue 27 item 3, the grammar engine's core): what
// GBNF, JSON Schema and json_object compile to, matched as a pushdown automaton whose stack
// sets are interned into the states of a lazy DFA, so that a token mask is a walk of the
// vocabulary's byte trie through cached transitions (grammar/constraint.h).
//
// Syntax: llama.cpp's GBNF. `name ::= alternatives` (names of letters, digits and '-', '_');
// `|` between alternatives; sequences of "literals" (escapes \n \r \t \\ \" \[ \] \xHH
// \uHHHH \UHHHHHHHH), character classes `[a-z_]` and `[^"\\]` over code points (any UTF-8
// character: a class over non-ASCII code points matches their byte sequences), `.` (any
// character), rule references, groups `( )`, and the postfix operators `* + ?` and
// `{m}`, `{m,}`, `{m,n}`; `#` comments to the end of the line; a rule may continue over
// several lines (a new rule starts at `name ::=`). The start rule is `root` unless named. Errors
// (an Error(invalid_argument) naming the line and column): syntax, an undefined rule, left
// recursion (a rule that can reach itself again before consuming a byte, except as its
// alternative's last element).
//
// Matching: a stack is a chain of grammar positions (the next element, then the places to
// return to); a state is the set of stacks whose top is a byte class, plus whether the text
// so far is complete. Stacks are interned as (position, parent) nodes, so equal stacks are
// one id and a state is a sorted list of ids; a reference in an alternative's last place
// returns straight to the parent (tail calls: repetition does not grow the stack).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/automaton.h"

namespace parley {

class Grammar : public ByteAutomaton {
 public:
  // Throws Error(invalid_argument) as described above. `source` names the grammar in
  // errors (e.g. "grammar", "json_schema"); `start` is the start rule.
  static std::shared_ptr<Grammar> compile_gbnf(std::string_view gbnf,
                                               std::string_view source = "grammar",
                                               std::string_view start = "root");

  ~Grammar() override;
  int32_t start() override;
  int32_t step(int32_t s, uint8_t b) override;
  bool accepting(int32_t s) override;
  const int32_t* transitions(int32_t s) override;
  using ByteAutomaton::step;
  const std::string& describe() const override { return describe_; }
  size_t states() const;  // DFA states built so far

  struct Impl;  // grammar.cpp

 private:
  explicit Grammar(std::unique_ptr<Impl> impl, std::string describe);
  std::unique_ptr<Impl> impl_;
  std::string describe_;
};

}  // namespace parley
