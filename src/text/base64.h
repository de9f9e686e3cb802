// RFC 4648 base64 decoding, shared by the tiktoken ranks reader (strict: '=' padding to a
// multiple of 4, no whitespace, as tiktoken's load_tiktoken_bpe) and the server's JSON
// audio bodies (lenient: whitespace skipped, padding optional, as most encoders emit).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace parley {

struct Base64Rules {
  bool skip_whitespace = false;  // ' ', '\n', '\r', '\t' anywhere are ignored
  bool require_padding = true;   // length (without whitespace) a multiple of 4, '=' padded
};

// The decoded bytes, or nullopt when `text` is not base64 under `rules`: a character
// outside the alphabet, data after '=', more than two '=', a length that cannot end a
// group, or non-zero leftover bits.
std::optional<std::string> base64_decode(std::string_view text, const Base64Rules& rules = {});

}  // namespace parley
