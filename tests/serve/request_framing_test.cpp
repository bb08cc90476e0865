// Where a request ends in the bytes received so far (serve/http/request_framing.h): the connection front hands a
// worker only complete requests, and rejects the ones that can never be.
#include <gtest/gtest.h>

#include "serve/http/request_framing.h"

namespace sinklm {
namespace {

using Kind = RequestFrame::Kind;

const FrameLimits kLimits{1024, 100};

TEST(RequestFraming, AGetIsCompleteAtTheBlankLineAndNotBefore) {
  const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  for (size_t n = 0; n < get.size(); ++n) EXPECT_EQ(frame_request(get.substr(0, n), kLimits).kind, Kind::need_more) << n;
  const RequestFrame f = frame_request(get + "GET /next", kLimits);  // a pipelined request is not part of it
  EXPECT_EQ(f.kind, Kind::complete);
  EXPECT_EQ(f.total_bytes, get.size());
  EXPECT_EQ(f.header_bytes, get.size());
}

TEST(RequestFraming, AContentLengthBodyIsWaitedForWhole) {
  const std::string head = "POST /v1/completions HTTP/1.1\r\ncontent-length: 10\r\nExpect: 100-continue\r\n\r\n";
  RequestFrame f = frame_request(head + "12345", kLimits);
  EXPECT_EQ(f.kind, Kind::need_more);
  EXPECT_EQ(f.header_bytes, head.size());
  EXPECT_TRUE(f.expects_continue);
  f = frame_request(head + "1234567890XX", kLimits);
  EXPECT_EQ(f.kind, Kind::complete);
  EXPECT_EQ(f.total_bytes, head.size() + 10);
}

TEST(RequestFraming, AChunkedBodyEndsAtItsLastChunkAndTrailers) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\n";
  for (size_t n = 0; n <= body.size(); ++n)
    EXPECT_EQ(frame_request(head + body.substr(0, n), kLimits).kind, Kind::need_more) << n;
  RequestFrame f = frame_request(head + body + "\r\n", kLimits);
  EXPECT_EQ(f.kind, Kind::complete);
  EXPECT_EQ(f.total_bytes, head.size() + body.size() + 2);
  f = frame_request(head + body + "X-Trailer: 1\r\n\r\nGET", kLimits);
  EXPECT_EQ(f.kind, Kind::complete);
  EXPECT_EQ(f.total_bytes, head.size() + body.size() + 16);
}

TEST(RequestFraming, RequestsThatCanNeverBeServedAreRejectedEarly) {
  auto status = [](const std::string& bytes) {
    const RequestFrame f = frame_request(bytes, kLimits);
    return f.kind == Kind::rejected ? f.status : 0;
  };
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n"), 413);  // before the body is sent
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"), 413);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n"), 413);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a')), 431);  // no blank line yet, already too long
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nno colon\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\n\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n"), 0);  // at the limit: fine
}

// RFC 9112 5.1 / RFC 9110 5.5: a field name is a token (no whitespace before the colon, no folded line), and a
// field value holds no control character but a tab.
TEST(RequestFraming, HeaderNamesAndValuesFollowTheRfcs) {
  auto frame = [](const std::string& header_line) {
    return frame_request("GET / HTTP/1.1\r\nHost: x\r\n" + header_line + "\r\n\r\n", kLimits);
  };
  auto code = [&](const std::string& header_line) {
    const RequestFrame f = frame(header_line);
    return f.kind == Kind::rejected ? f.status : 0;
  };
  EXPECT_EQ(frame("Authorization : Bearer k").code, "bad_header");
  EXPECT_EQ(frame(std::string("X-Note: a\0b", 12)).code, "bad_header");
  EXPECT_EQ(frame("X-Note: one\r\n two").code, "bad_header");
  for (const std::string bad : {"Authorization : Bearer k", "X-Note\t: one", "X Note: one", "X-Note: one\r\n two",
                                "X-Note: one\r\n\ttwo", "X(Note): one"})
    EXPECT_EQ(code(bad), 400) << bad;
  for (const std::string bad : {std::string("X-Note: a\0b", 12), std::string("X-Note: a\x01b"), std::string("X-Note: a\x7f"),
                                std::string("X-Note: a\rb")})
    EXPECT_EQ(code(bad), 400) << bad.size();
  for (const std::string fine : {"X-Note: a\tb", "X-Note:", "X-Note:   spaced   ", "x-!#$%&'*+.^_`|~: 1",
                                 "X-Note: caf\xc3\xa9"})
    EXPECT_EQ(code(fine), 0) << fine;
}

}  // namespace
}  // namespace sinklm
