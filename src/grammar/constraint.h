// A per-choice constraint on generated tokens (the grammar engine's interface to sampling):
// before each draw it masks the logits of tokens that cannot continue a valid answer, and
// after each accepted token it advances. RegexConstraint is the first kind: the answer must
// match a Regex as a whole. A token is allowed when its bytes keep the match alive (the DFA
// steps through them without dying); the stop tokens are allowed when the answer so far is a
// full match; when nothing else can follow a full match, only they remain. Masks are computed
// once per DFA state by stepping every token's bytes (the DFA caches its transitions).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/regex.h"

namespace parley {

class RegexConstraint {
 public:
  // token_bytes[id]: the bytes token id adds to the text (empty: never allowed, e.g. special
  // tokens and padded ids); stop_tokens: the ids that end the answer.
  RegexConstraint(std::shared_ptr<Regex> re,
                  std::shared_ptr<const std::vector<std::string>> token_bytes,
                  std::vector<int32_t> stop_tokens);

  // logits[id] = -inf for every disallowed id. Throws Error(invalid_argument) when no
  // token can continue (the pattern needs bytes no token has).
  void mask(std::span<float> logits);
  void accept(int32_t token);  // advance (a stop token ends it)
  bool complete();             // the text so far is a full match

 private:
  const std::vector<uint8_t>& allowed(int32_t state);

  std::shared_ptr<Regex> re_;
  std::shared_ptr<const std::vector<std::string>> bytes_;
  std::vector<int32_t> stops_;
  int32_t state_;
  std::unordered_map<int32_t, std::vector<uint8_t>> masks_;  // per DFA state
};

}  // namespace parley
