// UTF-8 helpers for the chat tokenizers: validation, Rust-style lossy decoding (one U+FFFD
// per maximal invalid subsequence, as String::from_utf8_lossy), and Unicode normalization
// forms and lowercasing through utf8proc.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace parley {

// Length of the well-formed UTF-8 sequence at s[i], or 0 when it is malformed or cut off.
size_t utf8_sequence_length(std::string_view s, size_t i);
// Byte offset of the first malformed sequence, or npos when s is valid UTF-8.
size_t utf8_invalid_offset(std::string_view s);
// Appends bytes to out, each maximal invalid subsequence replaced by U+FFFD.
void append_utf8_lossy(std::string_view bytes, std::string& out);
// Number of bytes at the end of s that form the start of a multi-byte character whose
// remaining bytes are missing (0-3): what a stream must hold back.
size_t utf8_incomplete_tail(std::string_view s);

enum class NormalForm { nfc, nfd, nfkc, nfkd };
// s (valid UTF-8) in the normal form; throws Error(invalid_argument) if utf8proc rejects it.
std::string unicode_normalize(std::string_view s, NormalForm form);
// Simple (one-to-one) lowercase mapping of every code point.
std::string unicode_lowercase(std::string_view s);
// s without combining marks (general category Mn), for StripAccents after NFD.
std::string unicode_strip_marks(std::string_view s);

inline constexpr std::string_view kReplacementChar = "\xef\xbf\xbd";  // U+FFFD

}  // namespace parley
