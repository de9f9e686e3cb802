// PCRE2 behind TokRegex; see tokenizer_regex.h for the iteration rules.
#include "text/tokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "engine/error.h"

namespace parley {

namespace {

// Oniguruma's \w (the tokenizers crate's engine) is Unicode's word class: letters, marks,
// decimal digits, connector punctuation and the joiners U+200C/U+200D. PCRE2's UCP \w
// lacks the joiners (and, before 10.43, marks), so \w and \W are spelled out.
constexpr std::string_view kWordItems = R"(\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200c}\x{200d})";

std::string onig_word_class(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[i + 1];
      ++i;
      if (e == 'w') {
        out += in_class ? std::string(kWordItems) : "[" + std::string(kWordItems) + "]";
      } else if (e == 'W' && !in_class) {
        out += "[^" + std::string(kWordItems) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct TokRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

TokRegex::TokRegex(const std::string& pattern, const std::string& source)
    : code_(std::make_unique<Code>()), source_(source) {
  const std::string onig = onig_word_class(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(onig.data()), onig.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw Error(ErrorKind::invalid_argument,
                "[tokenizer] " + source + ": regex does not compile at offset " +
                    std::to_string(offset) + ": " + reinterpret_cast<const char*>(msg));
  }
  // Without JIT support pcre2_match interprets the pattern; same results.
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

TokRegex::~TokRegex() = default;

std::vector<std::pair<size_t, size_t>> TokRegex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> mctx(
      pcre2_match_context_create(nullptr), &pcre2_match_context_free);
  // The JIT's default 32 KiB stack is too small for \s+(?!\S) on long whitespace runs.
  std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)> stack(
      pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr), &pcre2_jit_stack_free);
  pcre2_jit_stack_assign(mctx.get(), nullptr, stack.get());
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t from = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (from <= text.size()) {
    // The callers pass valid UTF-8 (encode checks its input once), so PCRE2 need not
    // re-check the rest of the subject on every call.
    int rc = pcre2_match(code_->code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, md.get(),
                         mctx.get());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      throw Error(ErrorKind::internal, "[tokenizer] " + source_ + ": regex match failed: " +
                                           reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    size_t begin = ov[0], end = ov[1];
    if (begin == end && have_last && last_end == end) {
      if (from >= text.size()) break;
      // Step over one UTF-8 character (text is valid UTF-8 here).
      size_t step = 1;
      while (from + step < text.size() &&
             (static_cast<unsigned char>(text[from + step]) & 0xc0) == 0x80)
        ++step;
      from += step;
      continue;
    }
    out.emplace_back(begin, end);
    have_last = true;
    last_end = end;
    from = end;
  }
  return out;
}

}  // namespace parley
