// The web page served at GET / (src/server/web/index.html, docs/SERVER.md "Web page"),
// embedded at build time by cmake/EmbedText.cmake into web_page.cpp in the build folder.
#pragma once
#include <string_view>

namespace parley::server {

// The whole page: one HTML file with its CSS and JavaScript inline.
std::string_view web_page();

}  // namespace parley::server
