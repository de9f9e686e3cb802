// TokRegex: a compiled PCRE2 pattern (UTF + UCP, JIT) that lists its matches the way the
// Hugging Face tokenizers crate's Oniguruma iterator does, empty matches included: they
// are split points for Split pre-tokenizers (e.g. a lookahead-only digit-group pattern).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace parley {

class TokRegex {
 public:
  // Throws Error(invalid_argument) naming `source` when the pattern does not compile.
  TokRegex(const std::string& pattern, const std::string& source);
  ~TokRegex();
  TokRegex(const TokRegex&) = delete;
  TokRegex& operator=(const TokRegex&) = delete;

  // Byte ranges [begin, end) of the matches in text, in order. After an empty match at p,
  // or a match ending at p, an empty match at p is skipped and the search moves on by one
  // character (onig's FindMatches). text must be valid UTF-8 (not checked). Thread-safe:
  // match data is made per call.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  std::string source_;
};

}  // namespace parley
