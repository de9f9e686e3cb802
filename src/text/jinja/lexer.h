// Tokenizer for Jinja2 template source with jinja2's own whitespace rules: newlines
// normalized to "\n", one trailing newline dropped (keep_trailing_newline=False),
// trim_blocks and lstrip_blocks as Hugging Face enables them, `-`/`+` whitespace control,
// comments dropped and {% raw %} bodies passed through as text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parley::jinja {

enum class Tok {
  data,
  variable_begin,
  variable_end,
  block_begin,
  block_end,
  name,
  string,
  integer,
  floating,
  op,  // text holds the operator: "+", "//", "==", "(", ...
  eof
};

struct Token {
  Tok type;
  std::string text;  // data, name, decoded string literal, operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws TemplateError (with its line) on an unterminated tag, comment, string or raw block
// and on characters that start no token.
std::vector<Token> tokenize(const std::string& source, const LexOptions& options = {});

}  // namespace parley::jinja
