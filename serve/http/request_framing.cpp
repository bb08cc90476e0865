#include "serve/http/request_framing.h"

#include <cctype>
#include <cstdint>
#include <string>

namespace sinklm {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 9110 5.6.2: token = 1*tchar, tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" /
// "_" / "`" / "|" / "~" / DIGIT / ALPHA.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos)
      return false;
  return true;
}

// RFC 9110 5.5: a field value holds visible characters, spaces and tabs, never NUL, CR, LF or another control.
bool has_control(std::string_view s) {
  for (char c : s)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return true;
  return false;
}

// `s` for an error message: control bytes as \xNN, at most 64 characters.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += {'\\', 'x', hex[u >> 4], hex[u & 15]};
    }
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

RequestFrame reject(RequestFrame frame, int status, std::string code, std::string message) {
  frame.kind = RequestFrame::Kind::rejected;
  frame.status = status;
  frame.code = std::move(code);
  frame.message = std::move(message);
  return frame;
}

std::string too_large(size_t max_body_bytes) { return "the request body exceeds " + std::to_string(max_body_bytes) + " bytes"; }

// What the headers say about the body.
struct BodyFraming {
  bool chunked = false;
  bool has_length = false;
  uint64_t length = 0;
  bool length_overflows = false;  // more digits than any limit could allow
  bool conflicting = false;       // two different Content-Lengths, or Content-Length with Transfer-Encoding
  bool bad = false;               // a Content-Length that is not a number, a transfer coding other than chunked
};

void read_header(std::string_view name, std::string_view value, BodyFraming& body, bool& expects_continue) {
  if (iequals(name, "Content-Length")) {
    if (value.empty()) body.bad = true;
    uint64_t n = 0;
    bool overflow = false;
    for (char c : value) {
      if (c < '0' || c > '9') {
        body.bad = true;
        return;
      }
      if (n > (UINT64_MAX - 9) / 10) overflow = true;
      else n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    if (body.has_length && (n != body.length || overflow != body.length_overflows)) body.conflicting = true;
    body.has_length = true;
    body.length = n;
    body.length_overflows = overflow;
  } else if (iequals(name, "Transfer-Encoding")) {
    if (iequals(value, "chunked")) body.chunked = true;
    else body.bad = true;  // httplib decodes chunked only; anything else would be read wrongly
  } else if (iequals(name, "Expect")) {
    expects_continue = iequals(value, "100-continue");
  }
}

// Where a chunked body that starts at `at` ends (just past its last CRLF), 0 while incomplete; rejects
// malformed framing and bodies over the limit.
RequestFrame frame_chunked(std::string_view bytes, size_t at, RequestFrame frame, const FrameLimits& limits) {
  uint64_t body = 0;
  for (;;) {
    const size_t eol = bytes.find("\r\n", at);
    if (eol == std::string_view::npos) {
      if (bytes.size() - at > 1024) return reject(frame, 400, "bad_chunk", "a chunk size line over 1024 bytes");
      return frame;
    }
    std::string_view line = bytes.substr(at, eol - at);
    line = trim(line.substr(0, line.find(';')));  // chunk extensions are allowed and ignored
    if (line.empty() || line.size() > 15) return reject(frame, 400, "bad_chunk", "a chunk size that is not a hex number");
    uint64_t size = 0;
    for (char c : line) {
      const int digit = hex_digit(c);
      if (digit < 0) return reject(frame, 400, "bad_chunk", "a chunk size that is not a hex number");
      size = size * 16 + static_cast<uint64_t>(digit);
    }
    at = eol + 2;
    if (size == 0) {  // the last chunk, then trailer lines until a blank one
      if (bytes.substr(at, 2) == "\r\n") {
        frame.kind = RequestFrame::Kind::complete;
        frame.total_bytes = at + 2;
        return frame;
      }
      const size_t end = bytes.find("\r\n\r\n", at);
      if (end == std::string_view::npos) {
        if (bytes.size() - at > limits.max_header_bytes) return reject(frame, 431, "headers_too_large", "trailers too large");
        return frame;
      }
      frame.kind = RequestFrame::Kind::complete;
      frame.total_bytes = end + 4;
      return frame;
    }
    body += size;
    if (body > limits.max_body_bytes) return reject(frame, 413, "body_too_large", too_large(limits.max_body_bytes));
    if (bytes.size() < at + size + 2) return frame;
    if (bytes.substr(at + size, 2) != "\r\n") return reject(frame, 400, "bad_chunk", "a chunk not followed by CRLF");
    at += size + 2;
  }
}

}  // namespace

RequestFrame frame_request(std::string_view bytes, const FrameLimits& limits) {
  RequestFrame frame;
  const size_t end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (bytes.size() > limits.max_header_bytes)
      return reject(frame, 431, "headers_too_large", "the request line and headers exceed " +
                                                         std::to_string(limits.max_header_bytes) + " bytes");
    if (bytes.find("\n\n") != std::string_view::npos)
      return reject(frame, 400, "bad_request", "header lines must end with CRLF");
    return frame;
  }
  if (end + 4 > limits.max_header_bytes)
    return reject(frame, 431, "headers_too_large",
                  "the request line and headers exceed " + std::to_string(limits.max_header_bytes) + " bytes");
  frame.header_bytes = end + 4;
  BodyFraming body;
  size_t line_start = bytes.find("\r\n") + 2;  // past the request line
  while (line_start < end + 2) {
    const size_t eol = bytes.find("\r\n", line_start);
    const std::string_view line = bytes.substr(line_start, eol - line_start);
    if (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
      return reject(frame, 400, "bad_header", "a folded header line (one that starts with whitespace; RFC 9112 5.2)");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return reject(frame, 400, "bad_request", "a header line without a name");
    const std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    // RFC 9112 5.1: whitespace between a field name and its colon MUST be rejected (it is how requests are
    // smuggled past a proxy that reads the name differently).
    if (!is_token(name))
      return reject(frame, 400, "bad_header", "header name '" + printable(name) + "' holds whitespace or a character a name may not");
    if (has_control(value))
      return reject(frame, 400, "bad_header", "header " + std::string(name) + "'s value holds a control character");
    read_header(name, value, body, frame.expects_continue);
    line_start = eol + 2;
  }
  if (body.bad) return reject(frame, 400, "bad_request", "a Content-Length or Transfer-Encoding that cannot be read");
  if (body.conflicting || (body.chunked && body.has_length))
    return reject(frame, 400, "bad_request", "conflicting Content-Length and Transfer-Encoding headers");
  if (body.chunked) return frame_chunked(bytes, frame.header_bytes, frame, limits);
  if (body.length_overflows || body.length > limits.max_body_bytes)
    return reject(frame, 413, "body_too_large", too_large(limits.max_body_bytes));
  if (bytes.size() - frame.header_bytes < body.length) return frame;
  frame.kind = RequestFrame::Kind::complete;
  frame.total_bytes = frame.header_bytes + static_cast<size_t>(body.length);
  return frame;
}

}  // namespace sinklm
