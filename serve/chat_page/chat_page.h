// The chat page of `sinklm serve` (GET /): HTML, CSS and plain JavaScript from serve/chat_page/, embedded in
// the binary at build time (serve/chat_page/chat_page.cpp), so the page works offline and needs no build step or CDN.
#pragma once
#include <string_view>
#include <vector>

namespace sinklm {

struct StaticFile {
  const char* path;          // the URL path it is served at
  const char* content_type;  // with charset for text
  std::string_view body;
};

// Every file of the page; "/" is index.html.
const std::vector<StaticFile>& chat_page_files();

}  // namespace sinklm
