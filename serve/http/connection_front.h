// The connection front of `sinklm serve`: one thread that accepts every connection and polls them all, reads
// each request whole (headers, then body) under total deadlines, and only then hands it to a worker thread.
// Why: httplib gives every connection a worker from a fixed pool and times out each read, not each request,
// so 64 clients sending a header byte per second (or a few hundred that never send anything) held every
// worker and the server answered no one. Here a worker only ever sees a complete request; a client that
// sends nothing costs one file descriptor and one poll entry, until its deadline closes it.
//
// Limits (each a `sinklm serve` flag, docs/serving.md "Connections"):
//   - open connections in total and per client address: beyond them a new connection is answered
//     503 with Retry-After, then what the client sends is read and dropped until it closes (at most 1 s,
//     256 such connections at once) so that its request arriving later cannot reset the 503 away;
//   - the request line and headers must arrive within header_timeout of the request's first byte, the body
//     within body_timeout of the headers' end: otherwise 408 and the connection is closed;
//   - a connection between requests (new, or kept alive) is closed silently after idle_timeout;
//   - a complete request waits for a free worker here, at most queue_timeout: then 503 with Retry-After.
// Responses are written by the worker, each write bounded by write_timeout (serve/http/client_stream.h).
//
// Alternatives weighed: Boost.Beast/Asio (async, per-operation timers) would replace httplib and every route
// and streamed response with it; libmicrohttpd (Debian) has a connection limit, per-IP limit and a connection
// timeout, but that timeout is also per-activity and it would likewise mean rewriting the routes. httplib's own
// Server::process_request(Stream&) lets the existing routes run unchanged on a request that is already in
// memory, so this front is the smallest change that bounds every phase of a request.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "serve/http/request_framing.h"

namespace httplib {
class Stream;
}

namespace sinklm {

struct ConnectionLimits {
  int64_t max_connections = 512;
  int64_t max_per_client = 64;
  double idle_timeout_s = 15;
  double header_timeout_s = 10;
  double body_timeout_s = 30;
  double queue_timeout_s = 30;  // a complete request waiting this long for a worker is answered 503
  double write_timeout_s = 5;
  FrameLimits frame;  // header and body sizes (serve/http/request_framing.h)
  int http_workers = 64;                    // workers serving complete requests (--http-workers)
  int retry_after_s = 2;                    // in the 503 of a connection over a limit
  size_t max_requests_per_connection = 1000;
};

class ConnectionFront {
 public:
  // Serves one complete request; returns whether the connection may stay open for the next one.
  // close: this response must close it. continue_sent: the front already answered `Expect: 100-continue`.
  using Serve = std::function<bool(httplib::Stream& stream, bool close, bool continue_sent)>;
  // The JSON body of an error the front answers itself (408, 413, 431, 400, 503).
  using ErrorBody = std::function<std::string(int status, const std::string& code, const std::string& message)>;
  using OnAnswer = std::function<void(int status)>;  // each of those answers, for the metrics

  ConnectionFront(ConnectionLimits limits, Serve serve, ErrorBody error_body, OnAnswer on_answer);
  ~ConnectionFront();
  int bind(const std::string& host, int port);  // listens; returns the port (a free one for port 0)
  int listen_fd() const;
  void run();   // until stop(); then waits for the requests in flight
  void stop();  // thread-safe

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sinklm
