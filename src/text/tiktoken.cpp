// .tiktoken ranks file reader with line-level validation.
#include "text/tiktoken.h"

#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "engine/error.h"
#include "text/base64.h"

namespace parley {

std::vector<std::string> parse_tiktoken_ranks(std::string_view contents, const std::string& name) {
  auto fail = [&](size_t line, const std::string& problem) {
    throw Error(ErrorKind::invalid_argument,
                "[tokenizer] " + name + ":" + std::to_string(line) + ": " + problem);
  };
  std::vector<std::string> by_rank;
  std::vector<size_t> line_of_rank;
  std::unordered_map<std::string, size_t> line_of_token;
  size_t line_no = 0;
  size_t pos = 0;
  std::string token;
  while (pos < contents.size()) {
    size_t eol = contents.find('\n', pos);
    if (eol == std::string_view::npos) eol = contents.size();
    std::string_view line = contents.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;  // tiktoken skips empty lines
    size_t space = line.find(' ');
    if (space == std::string_view::npos) fail(line_no, "expected \"<base64> <rank>\"");
    std::string_view b64 = line.substr(0, space), rank_text = line.substr(space + 1);
    // multilingual.tiktoken holds "=" (no bytes) at rank 50256, a placeholder that Python's
    // lenient b64decode reads as b''; keep it as an empty token that never matches.
    if (b64.find_first_not_of('=') == std::string_view::npos && b64.size() <= 2)
      token.clear();
    else if (auto bytes = base64_decode(b64); bytes && !bytes->empty())
      token = std::move(*bytes);
    else
      fail(line_no, "bad base64 token \"" + std::string(b64) + "\"");
    uint64_t rank = 0;
    auto [end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (ec != std::errc() || end != rank_text.data() + rank_text.size() || rank > INT32_MAX)
      fail(line_no, "bad rank \"" + std::string(rank_text) + "\"");
    auto [it, fresh] = line_of_token.emplace(token, line_no);
    if (!fresh) fail(line_no, "duplicate token (first on line " + std::to_string(it->second) + ")");
    if (rank >= by_rank.size()) {
      by_rank.resize(rank + 1);
      line_of_rank.resize(rank + 1, 0);
    }
    if (line_of_rank[rank] != 0)
      fail(line_no, "duplicate rank " + std::to_string(rank) + " (first on line " +
                        std::to_string(line_of_rank[rank]) + ")");
    line_of_rank[rank] = line_no;
    by_rank[rank] = token;
  }
  if (by_rank.empty())
    throw Error(ErrorKind::invalid_argument, "[tokenizer] " + name + ": no ranks");
  for (size_t r = 0; r < by_rank.size(); ++r)
    if (line_of_rank[r] == 0)
      throw Error(ErrorKind::invalid_argument,
                  "[tokenizer] " + name + ": ranks are not contiguous: rank " + std::to_string(r) +
                      " is missing but rank " + std::to_string(by_rank.size() - 1) +
                      " is on line " + std::to_string(line_of_rank.back()));
  return by_rank;
}

std::vector<std::string> load_tiktoken_ranks(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::not_found, "[tokenizer] " + path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_tiktoken_ranks(ss.str(), path);
}

}  // namespace parley
