// multipart/form-data (RFC 7578) parsing for uploads: the boundary from the Content-Type
// header, then each part's Content-Disposition name/filename, Content-Type and bytes.
// Every malformed input throws Error(invalid_argument) with a message that says what was
// expected; parts are views into the body, which must outlive them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace parley::server {

struct MultipartPart {
  std::string name;      // the form field name
  std::string filename;  // empty when the part is not a file
  bool has_filename = false;
  std::string content_type;  // empty when the part has none
  std::string_view data;
};

// The boundary parameter of a "multipart/form-data; boundary=..." header value; throws
// invalid_argument when the value is not multipart/form-data or has no usable boundary.
std::string multipart_boundary(std::string_view content_type);

// Splits a multipart body. Throws invalid_argument on a missing opening or closing
// delimiter, a part without headers or without a Content-Disposition name.
std::vector<MultipartPart> parse_multipart(std::string_view body, std::string_view boundary);

}  // namespace parley::server
