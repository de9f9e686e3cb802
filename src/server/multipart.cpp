#include "server/multipart.h"

#include <algorithm>
#include <cctype>

#include "engine/error.h"

namespace parley::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of `key` among "; key=value" or "; key=\"value\"" parameters (keys compared
// case-insensitively); found=false when absent.
std::string header_param(std::string_view value, std::string_view key, bool& found) {
  found = false;
  size_t pos = value.find(';');
  while (pos != std::string_view::npos) {
    std::string_view rest = trim(value.substr(pos + 1));
    const size_t eq = rest.find('=');
    if (eq == std::string_view::npos) return "";
    const std::string k = lower(trim(rest.substr(0, eq)));
    std::string_view v = rest.substr(eq + 1);
    std::string out;
    size_t consumed = 0;
    if (!v.empty() && v.front() == '"') {
      size_t i = 1;
      for (; i < v.size() && v[i] != '"'; ++i) {
        if (v[i] == '\\' && i + 1 < v.size()) ++i;
        out.push_back(v[i]);
      }
      check_arg(i < v.size(), "[multipart] unterminated quoted parameter '" + k + "'");
      consumed = i + 1;
    } else {
      consumed = std::min(v.find(';'), v.size());
      out = std::string(trim(v.substr(0, consumed)));
    }
    if (k == key) {
      found = true;
      return out;
    }
    const size_t next = v.find(';', consumed);
    if (next == std::string_view::npos) return "";
    pos = size_t(v.data() + next - value.data());
  }
  return "";
}

}  // namespace

std::string multipart_boundary(std::string_view content_type) {
  const std::string type = lower(trim(content_type.substr(0, content_type.find(';'))));
  check_arg(type == "multipart/form-data",
            "[multipart] expected Content-Type multipart/form-data, got '" + type + "'");
  bool found = false;
  const std::string b = header_param(content_type, "boundary", found);
  check_arg(found && !b.empty() && b.size() <= 70,
            "[multipart] Content-Type multipart/form-data needs a boundary of 1 to 70 "
            "characters");
  return b;
}

std::vector<MultipartPart> parse_multipart(std::string_view body, std::string_view boundary) {
  const std::string delim = "--" + std::string(boundary);
  const std::string next_delim = "\r\n" + delim;
  // The body starts with the first delimiter (a preamble before it is allowed).
  size_t pos = 0;
  if (body.substr(0, delim.size()) != delim) {
    const size_t first = body.find(next_delim);
    check_arg(first != std::string_view::npos,
              "[multipart] body has no '--" + std::string(boundary) + "' delimiter");
    pos = first + 2;
  }
  std::vector<MultipartPart> parts;
  while (true) {
    pos += delim.size();
    if (body.substr(pos, 2) == "--") return parts;  // the closing delimiter
    // Transport padding, then CRLF.
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
    check_arg(body.substr(pos, 2) == "\r\n", "[multipart] expected CRLF after a delimiter");
    pos += 2;
    const size_t headers_end = body.find("\r\n\r\n", pos);
    const size_t end = body.find(next_delim, pos);
    check_arg(end != std::string_view::npos, "[multipart] part " + std::to_string(parts.size()) +
                                                 " is not closed by a delimiter (truncated body?)");
    MultipartPart part;
    if (body.substr(pos, 2) == "\r\n") {
      pos += 2;  // no headers at all
    } else {
      check_arg(headers_end != std::string_view::npos && headers_end < end,
                "[multipart] part " + std::to_string(parts.size()) + " has no header block");
      std::string_view headers = body.substr(pos, headers_end - pos);
      while (!headers.empty()) {
        const size_t eol = std::min(headers.find("\r\n"), headers.size());
        const std::string_view line = headers.substr(0, eol);
        headers.remove_prefix(std::min(eol + 2, headers.size()));
        const size_t colon = line.find(':');
        check_arg(colon != std::string_view::npos,
                  "[multipart] malformed part header '" + std::string(line) + "'");
        const std::string name = lower(trim(line.substr(0, colon)));
        const std::string_view value = trim(line.substr(colon + 1));
        if (name == "content-disposition") {
          check_arg(lower(trim(value.substr(0, value.find(';')))) == "form-data",
                    "[multipart] expected Content-Disposition: form-data");
          bool found = false;
          part.name = header_param(value, "name", found);
          part.filename = header_param(value, "filename", part.has_filename);
        } else if (name == "content-type") {
          part.content_type = std::string(value);
        }
      }
      pos = headers_end + 4;
    }
    check_arg(!part.name.empty(), "[multipart] part " + std::to_string(parts.size()) +
                                      " has no Content-Disposition name");
    part.data = body.substr(pos, end - pos);
    parts.push_back(std::move(part));
    pos = end + 2;
  }
}

}  // namespace parley::server
