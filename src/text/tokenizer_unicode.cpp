// UTF-8 validation, lossy decoding and utf8proc-based normalization.
#include "text/tokenizer_unicode.h"

#include <utf8proc.h>

#include <cstdlib>

#include "engine/error.h"

namespace parley {
namespace {

// Valid range of the second byte after a lead byte (Unicode Table 3-7).
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xe0: return b >= 0xa0 && b <= 0xbf;
    case 0xed: return b >= 0x80 && b <= 0x9f;
    case 0xf0: return b >= 0x90 && b <= 0xbf;
    case 0xf4: return b >= 0x80 && b <= 0x8f;
    default: return b >= 0x80 && b <= 0xbf;
  }
}

int expected_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;  // continuation byte, C0, C1, F5..FF
}

// Bytes of the maximal prefix of a well-formed sequence at s[i] (at least 1).
size_t maximal_subpart(std::string_view s, size_t i) {
  auto lead = static_cast<unsigned char>(s[i]);
  int len = expected_length(lead);
  if (len <= 1) return 1;
  size_t n = 1;
  while (n < size_t(len) && i + n < s.size()) {
    auto b = static_cast<unsigned char>(s[i + n]);
    bool ok = n == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xbf);
    if (!ok) break;
    ++n;
  }
  return n;
}

std::string map_with(std::string_view s, int options, const char* what) {
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    utf8proc_ssize_t(s.size()), &dst, utf8proc_option_t(options));
  if (n < 0)
    throw Error(ErrorKind::invalid_argument,
                std::string("[tokenizer] ") + what + ": " + utf8proc_errmsg(n));
  std::string out(reinterpret_cast<char*>(dst), size_t(n));
  std::free(dst);
  return out;
}

template <typename F>
std::string map_code_points(std::string_view s, F&& f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data()) + i,
                                          utf8proc_ssize_t(s.size() - i), &cp);
    if (n <= 0) throw Error(ErrorKind::invalid_argument, "[tokenizer] text is not valid UTF-8");
    f(cp, s.substr(i, size_t(n)), out);
    i += size_t(n);
  }
  return out;
}

void append_code_point(utf8proc_int32_t cp, std::string& out) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
  out.append(reinterpret_cast<char*>(buf), size_t(n));
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto lead = static_cast<unsigned char>(s[i]);
  int len = expected_length(lead);
  if (len == 0 || i + len > s.size()) return 0;
  return maximal_subpart(s, i) == size_t(len) ? size_t(len) : 0;
}

size_t utf8_invalid_offset(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  size_t i = 0, run = 0;  // bytes[run, i) is valid and not yet copied
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = utf8_sequence_length(bytes, i);
    if (n > 0) {
      i += n;
      continue;
    }
    out.append(bytes.substr(run, i - run));
    out.append(kReplacementChar);
    i += maximal_subpart(bytes, i);
    run = i;
  }
  out.append(bytes.substr(run));
}

size_t utf8_incomplete_tail(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    size_t i = s.size() - back;
    auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xc0) == 0x80) continue;
    int len = expected_length(b);
    if (len > int(back) && maximal_subpart(s, i) == back) return back;
    return 0;
  }
  return 0;
}

std::string unicode_normalize(std::string_view s, NormalForm form) {
  int opts = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::nfc: opts |= UTF8PROC_COMPOSE; break;
    case NormalForm::nfd: opts |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::nfkc: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::nfkd: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  if (s.empty()) return {};
  return map_with(s, opts, "normalizer");
}

std::string unicode_lowercase(std::string_view s) {
  return map_code_points(s, [](utf8proc_int32_t cp, std::string_view, std::string& out) {
    append_code_point(utf8proc_tolower(cp), out);
  });
}

std::string unicode_strip_marks(std::string_view s) {
  return map_code_points(s, [](utf8proc_int32_t cp, std::string_view raw, std::string& out) {
    if (utf8proc_category(cp) != UTF8PROC_CATEGORY_MN) out.append(raw);
  });
}

}  // namespace parley
