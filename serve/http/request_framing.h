// Where one HTTP/1.1 request ends in the bytes received so far, without trusting the client: the connection
// front (serve/http/connection_front.h) reads a whole request before a worker sees it, and needs to know when it
// has one, or that it never will (too large, malformed). Pure: no sockets, no clock.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace sinklm {

struct RequestFrame {
  enum class Kind {
    need_more,  // the request is not complete yet
    complete,   // bytes [0, total_bytes) are one request
    rejected,   // answer `status` with `message` and close: it cannot become a valid request
  };
  Kind kind = Kind::need_more;
  size_t header_bytes = 0;  // through the blank line ending the headers; 0 = not yet seen
  size_t total_bytes = 0;   // headers and body (complete only)
  bool expects_continue = false;  // `Expect: 100-continue` (known once header_bytes > 0)
  int status = 0;           // rejected: 400, 413 or 431
  std::string code, message;
};

struct FrameLimits {
  size_t max_header_bytes = 64 << 10;  // request line and headers
  size_t max_body_bytes = 1 << 20;
};

// The frame of the request at the start of `bytes` (a Content-Length body, a chunked body, or none).
RequestFrame frame_request(std::string_view bytes, const FrameLimits& limits);

}  // namespace sinklm
