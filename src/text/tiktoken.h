// Reader for tiktoken's .tiktoken ranks files: one "<base64 token bytes> <rank>" per
// line, ranks 0..n-1 (e.g. whisper's multilingual.tiktoken, gpt2.tiktoken).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace parley {

// Token bytes by rank. Throws Error(not_found) when the file cannot be read and
// Error(invalid_argument) naming the file and line for bad base64, a missing or
// non-numeric rank, duplicate tokens or ranks, and ranks that are not exactly 0..n-1.
std::vector<std::string> load_tiktoken_ranks(const std::string& path);
// The same for file contents already in memory; `name` names them in messages.
std::vector<std::string> parse_tiktoken_ranks(std::string_view contents, const std::string& name);

}  // namespace parley
