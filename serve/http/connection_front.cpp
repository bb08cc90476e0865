#include "serve/http/connection_front.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "serve/http/client_stream.h"
#include "serve/http/request_framing.h"

namespace sinklm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kLinger = std::chrono::seconds(2);  // reading what a client still sends after an error answer
constexpr int kFdReserve = 128;                    // descriptors kept for session logs, snapshots, the model
constexpr size_t kMaxRefused = 256;                // refused connections lingering at once (beyond: closed now)
constexpr auto kRefusedLinger = std::chrono::seconds(1);
constexpr size_t kReadChunk = 64 << 10;

Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

std::string errno_text() { return std::strerror(errno); }

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

Endpoint endpoint_of(const sockaddr_storage& addr) {
  char ip[INET6_ADDRSTRLEN] = "";
  Endpoint e;
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
    e.port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, ip, sizeof ip);
    e.port = ntohs(a.sin6_port);
  }
  e.ip = ip;
  return e;
}

// One client connection while the front holds it (between requests, or reading one).
struct Connection {
  enum class Phase { idle, headers, body, lingering };
  int fd = -1;
  Endpoint peer, local;
  std::string buffer;   // received and not yet served (a pipelined next request stays here)
  std::string request;  // the complete request waiting for, or being served by, a worker
  Phase phase = Phase::idle;
  Clock::time_point deadline;
  bool continue_sent = false;
  size_t served = 0;
};

}  // namespace

struct ConnectionFront::Impl {
  ConnectionLimits limits;
  Serve serve;
  ErrorBody error_body;
  OnAnswer on_answer;
  int listen_fd = -1;
  int wake_fd = -1;  // eventfd: stop() and workers handing connections back wake the poll
  std::atomic<bool> stopping{false};

  // Front thread only.
  std::unordered_map<int, std::shared_ptr<Connection>> polled;
  std::unordered_map<std::string, int64_t> per_client;  // open connections per peer address
  // Connections answered 503 over a limit, read and dropped until the client closes or kRefusedLinger passes:
  // closed at once, the request arriving after the close would reset the 503 away before the client read it.
  std::unordered_map<int, Clock::time_point> refused;
  int64_t busy_workers = 0;
  std::deque<std::shared_ptr<Connection>> waiting;  // complete requests waiting for a worker
  Clock::time_point accept_paused_until;
  Clock::time_point last_accept_error_report;
  std::unique_ptr<httplib::ThreadPool> pool;

  std::mutex returned_mutex;  // connections workers are done with: (connection, may stay open)
  std::vector<std::pair<std::shared_ptr<Connection>, bool>> returned;

  Impl(ConnectionLimits l, Serve s, ErrorBody e, OnAnswer a)
      : limits(l), serve(std::move(s)), error_body(std::move(e)), on_answer(std::move(a)) {
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0) throw std::runtime_error("sinklm serve: eventfd: " + errno_text());
  }

  ~Impl() {
    if (listen_fd >= 0) ::close(listen_fd);
    ::close(wake_fd);
  }

  void wake() {
    const uint64_t one = 1;
    if (::write(wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
      std::fprintf(stderr, "sinklm serve: waking the connection front: %s\n", errno_text().c_str());
  }

  // Every open connection needs a descriptor: raise the soft limit toward the hard one when the limits ask
  // for more, and lower max_connections (saying so) when even the hard limit is too small.
  void fit_descriptor_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
      std::fprintf(stderr, "sinklm serve: getrlimit(RLIMIT_NOFILE): %s\n", errno_text().c_str());
      return;
    }
    const rlim_t needed = static_cast<rlim_t>(limits.max_connections + kFdReserve + kMaxRefused);
    if (limit.rlim_cur < needed) {
      rlimit raised = limit;
      raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
      if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
      else std::fprintf(stderr, "sinklm serve: setrlimit(RLIMIT_NOFILE, %llu): %s\n",
                        static_cast<unsigned long long>(raised.rlim_cur), errno_text().c_str());
    }
    if (limit.rlim_cur < needed) {
      const int64_t fits = std::max<int64_t>(1, static_cast<int64_t>(limit.rlim_cur) - kFdReserve - static_cast<int64_t>(kMaxRefused));
      std::fprintf(stderr, "sinklm serve: warning: --max-connections %lld lowered to %lld (open file limit %llu)\n",
                   static_cast<long long>(limits.max_connections), static_cast<long long>(fits),
                   static_cast<unsigned long long>(limit.rlim_cur));
      limits.max_connections = fits;
    }
  }

  int bind(const std::string& host, int port) {
    fit_descriptor_limit();
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string where = str("--host ", host, " --port ", port);
    if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
      fail(where, ": cannot listen there: ", gai_strerror(rc));
    std::string why = "no address";
    for (addrinfo* a = found; a && listen_fd < 0; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        why = "socket: " + errno_text();
        continue;
      }
      const int yes = 1;
      if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) != 0) why = "SO_REUSEADDR: " + errno_text();
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
        listen_fd = fd;
      } else {
        why = errno_text();
        ::close(fd);
      }
    }
    ::freeaddrinfo(found);
    if (listen_fd < 0) fail(where, ": cannot listen there (in use, or not a local address): ", why);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0)
      fail(where, ": getsockname: ", errno_text());
    return endpoint_of(bound).port;
  }

  // --- answers the front gives itself -------------------------------------------------------------------

  std::string response_bytes(int status, const std::string& code, const std::string& message) const {
    const std::string body = error_body(status, code, message);
    std::string head = str("HTTP/1.1 ", status, " ", reason_phrase(status), "\r\nContent-Type: application/json\r\n",
                           "Content-Length: ", body.size(), "\r\nConnection: close\r\n");
    if (status == 503) head += str("Retry-After: ", limits.retry_after_s, "\r\n");
    return head + "\r\n" + body;
  }

  // A short answer on a socket whose send buffer is empty: one non-blocking send. If it does not all fit,
  // the client is not reading, and the connection is closed anyway.
  void send_now(int fd, const std::string& bytes) {
    if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN && errno != EPIPE &&
        errno != ECONNRESET)
      std::fprintf(stderr, "sinklm serve: send: %s\n", errno_text().c_str());
  }

  // Answers an error and stops reading requests: the connection lingers (reading and dropping what the
  // client still sends) so that closing it does not reset the answer away before the client reads it.
  void answer(Connection& c, int status, const std::string& code, const std::string& message) {
    send_now(c.fd, response_bytes(status, code, message));
    if (on_answer) on_answer(status);
    if (::shutdown(c.fd, SHUT_WR) != 0 && errno != ENOTCONN)
      std::fprintf(stderr, "sinklm serve: shutdown: %s\n", errno_text().c_str());
    c.buffer.clear();
    c.phase = Connection::Phase::lingering;
    c.deadline = Clock::now() + kLinger;
  }

  // Over a connection limit: 503 now, then a short lingering close (`refused`), bounded in count and time so
  // that a flood cannot keep the descriptors.
  void refuse(int fd, const std::string& message) {
    send_now(fd, response_bytes(503, "too_many_connections", message));
    if (on_answer) on_answer(503);
    if (refused.size() < kMaxRefused && ::shutdown(fd, SHUT_WR) == 0) {
      refused.emplace(fd, Clock::now() + kRefusedLinger);
      return drain_refused(fd);
    }
    drop_arrived(fd);  // what already arrived would turn the close into a reset
    ::close(fd);
  }

  // Reads and drops what has arrived; false once the client closed its side (or on an error).
  static bool drop_arrived(int fd) {
    char drop[4096];
    ssize_t n;
    while ((n = ::recv(fd, drop, sizeof drop, MSG_DONTWAIT)) > 0) {}
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }

  void drain_refused(int fd) {
    if (!drop_arrived(fd)) close_refused(fd);
  }

  void close_refused(int fd) {
    ::close(fd);
    refused.erase(fd);
  }

  // --- accepting --------------------------------------------------------------------------------------

  int64_t open_connections() const {
    return static_cast<int64_t>(polled.size() + waiting.size()) + busy_workers;
  }

  void accept_ready() {
    for (int i = 0; i < 256; ++i) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        // Out of descriptors or memory: the listener stays readable, so wait a little instead of spinning.
        const auto now = Clock::now();
        if (now - last_accept_error_report > std::chrono::seconds(10)) {
          std::fprintf(stderr, "sinklm serve: accept: %s (pausing new connections briefly)\n", errno_text().c_str());
          last_accept_error_report = now;
        }
        accept_paused_until = now + std::chrono::milliseconds(100);
        return;
      }
      admit(fd, endpoint_of(addr));
    }
  }

  void admit(int fd, Endpoint peer) {
    if (open_connections() >= limits.max_connections)
      return refuse(fd, str("the server has ", limits.max_connections, " open connections (--max-connections); retry shortly"));
    int64_t& mine = per_client[peer.ip];
    if (mine >= limits.max_per_client) {
      if (mine == 0) per_client.erase(peer.ip);
      return refuse(fd, str("this address has ", limits.max_per_client,
                            " open connections (--max-connections-per-client); close some or retry shortly"));
    }
    ++mine;
    auto c = std::make_shared<Connection>();
    c->fd = fd;
    c->peer = std::move(peer);
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) c->local = endpoint_of(local);
    else std::fprintf(stderr, "sinklm serve: getsockname: %s\n", errno_text().c_str());
    c->deadline = Clock::now() + seconds(limits.idle_timeout_s);
    polled.emplace(fd, std::move(c));
  }

  void close_connection(Connection& c) {
    if (::close(c.fd) != 0) std::fprintf(stderr, "sinklm serve: close: %s\n", errno_text().c_str());
    auto it = per_client.find(c.peer.ip);
    if (it != per_client.end() && --it->second <= 0) per_client.erase(it);
  }

  void drop(int fd) {
    auto it = polled.find(fd);
    close_connection(*it->second);
    polled.erase(it);
  }

  // --- reading requests -------------------------------------------------------------------------------

  // Reads what arrived; false when the connection is to be closed (the client closed it, or an error).
  bool receive(Connection& c) {
    char chunk[kReadChunk];
    const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      if (c.phase != Connection::Phase::lingering) c.buffer.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    if (n < 0 && errno != ECONNRESET) std::fprintf(stderr, "sinklm serve: recv from %s: %s\n", c.peer.ip.c_str(), errno_text().c_str());
    return false;
  }

  // Moves a connection on with what it has received: to its next phase, an answer, or a worker.
  void advance(const std::shared_ptr<Connection>& c) {
    if (c->phase == Connection::Phase::lingering || c->buffer.empty()) return;
    const auto now = Clock::now();
    if (c->phase == Connection::Phase::idle) {  // the header deadline runs from the request's first byte
      c->phase = Connection::Phase::headers;
      c->deadline = now + seconds(limits.header_timeout_s);
    }
    const RequestFrame frame = frame_request(c->buffer, limits.frame);
    if (frame.kind == RequestFrame::Kind::rejected) return answer(*c, frame.status, frame.code, frame.message);
    if (frame.kind == RequestFrame::Kind::complete) return dispatch(c, frame.total_bytes);
    if (frame.header_bytes > 0 && c->phase == Connection::Phase::headers) {
      c->phase = Connection::Phase::body;
      c->deadline = now + seconds(limits.body_timeout_s);
      if (frame.expects_continue && !c->continue_sent) {  // the client waits for it before sending the body
        send_now(c->fd, "HTTP/1.1 100 Continue\r\n\r\n");
        c->continue_sent = true;
      }
    }
  }

  void expire(Connection& c) {
    switch (c.phase) {
      case Connection::Phase::headers:
        return answer(c, 408, "request_timeout",
                      str("the request line and headers did not arrive within ", limits.header_timeout_s, " s (--header-timeout)"));
      case Connection::Phase::body:
        return answer(c, 408, "request_timeout",
                      str("the request body did not arrive within ", limits.body_timeout_s, " s (--body-timeout)"));
      case Connection::Phase::idle:
      case Connection::Phase::lingering:
        return;  // closed by the caller
    }
  }

  // --- workers ----------------------------------------------------------------------------------------

  // A complete request goes to a free worker, or waits for one here (not in the pool's queue), so that a
  // request still waiting at --queue-timeout can be answered 503 then, not when a worker frees up.
  void dispatch(const std::shared_ptr<Connection>& c, size_t request_bytes) {
    c->request = c->buffer.substr(0, request_bytes);
    c->buffer.erase(0, request_bytes);
    polled.erase(c->fd);
    if (busy_workers < limits.http_workers) return start(c);
    c->deadline = Clock::now() + seconds(limits.queue_timeout_s);
    waiting.push_back(c);
  }

  void start(const std::shared_ptr<Connection>& c) {
    ++busy_workers;
    const bool last = c->served + 1 >= limits.max_requests_per_connection;
    const auto write_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(seconds(limits.write_timeout_s));
    pool->enqueue([this, c, last, write_timeout] {
      bool keep = false;
      try {
        ClientStream stream(c->fd, std::move(c->request), c->peer, c->local, write_timeout);
        keep = serve(stream, last, c->continue_sent);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sinklm serve: serving %s: %s\n", c->peer.ip.c_str(), e.what());
      }
      {
        std::lock_guard<std::mutex> lock(returned_mutex);
        returned.emplace_back(c, keep);
      }
      wake();
    });
  }

  void start_waiting() {
    while (!waiting.empty() && busy_workers < limits.http_workers) {
      auto c = waiting.front();
      waiting.pop_front();
      start(c);
    }
  }

  // Requests that waited for a worker past --queue-timeout: 503, and the connection lingers to its close.
  void expire_waiting(Clock::time_point now) {
    while (!waiting.empty() && waiting.front()->deadline <= now) {  // FIFO with one timeout: oldest first
      auto c = waiting.front();
      waiting.pop_front();
      c->request.clear();
      polled.emplace(c->fd, c);
      answer(*c, 503, "queue_timeout",
             str("the request waited ", limits.queue_timeout_s, " s for a worker (--queue-timeout); retry shortly"));
    }
  }

  void take_back() {
    std::vector<std::pair<std::shared_ptr<Connection>, bool>> back;
    {
      std::lock_guard<std::mutex> lock(returned_mutex);
      back.swap(returned);
    }
    for (auto& [c, keep] : back) {
      --busy_workers;
      if (!keep || stopping) {
        close_connection(*c);
        continue;
      }
      ++c->served;
      c->phase = Connection::Phase::idle;
      c->continue_sent = false;
      c->deadline = Clock::now() + seconds(limits.idle_timeout_s);
      polled.emplace(c->fd, c);
      advance(c);  // a pipelined request may be here already
    }
    start_waiting();
  }

  // --- the loop ---------------------------------------------------------------------------------------

  int poll_timeout_ms(Clock::time_point now) const {
    Clock::time_point next = now + std::chrono::seconds(1);
    for (const auto& [fd, c] : polled) next = std::min(next, c->deadline);
    if (!waiting.empty()) next = std::min(next, waiting.front()->deadline);
    if (accept_paused_until > now) next = std::min(next, accept_paused_until);
    for (const auto& [fd, deadline] : refused) next = std::min(next, deadline);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
    return static_cast<int>(std::max<int64_t>(0, ms + 1));
  }

  void run() {
    pool = std::make_unique<httplib::ThreadPool>(static_cast<size_t>(limits.http_workers));
    std::vector<pollfd> fds;
    while (!stopping) {
      take_back();
      const auto now = Clock::now();
      fds.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      const bool accepting = accept_paused_until <= now;
      fds.push_back({accepting ? listen_fd : -1, POLLIN, 0});  // a negative fd is skipped by poll
      for (const auto& [fd, c] : polled) fds.push_back({fd, POLLIN, 0});
      for (const auto& [fd, deadline] : refused) fds.push_back({fd, POLLIN, 0});
      const int n = ::poll(fds.data(), fds.size(), poll_timeout_ms(now));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error("sinklm serve: poll: " + errno_text());
      }
      if (fds[0].revents) {
        uint64_t count;
        if (::read(wake_fd, &count, sizeof count) < 0 && errno != EAGAIN)
          std::fprintf(stderr, "sinklm serve: reading the wake eventfd: %s\n", errno_text().c_str());
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        auto it = polled.find(fds[i].fd);
        if (it == polled.end()) {
          if (refused.count(fds[i].fd)) drain_refused(fds[i].fd);
          continue;
        }
        auto c = it->second;
        if (!receive(*c)) drop(c->fd);
        else advance(c);
      }
      if (fds[1].revents) accept_ready();
      expire_due();
    }
    shut_down();
  }

  void expire_due() {
    const auto now = Clock::now();
    expire_waiting(now);
    std::vector<int> due;
    for (const auto& [fd, deadline] : refused)
      if (deadline <= now) due.push_back(fd);
    for (int fd : due) close_refused(fd);
    due.clear();
    for (const auto& [fd, c] : polled)
      if (c->deadline <= now) due.push_back(fd);
    for (int fd : due) {
      Connection& c = *polled.at(fd);
      const bool answering = c.phase == Connection::Phase::headers || c.phase == Connection::Phase::body;
      if (answering) expire(c);
      else drop(fd);
    }
  }

  // Stops accepting, closes the connections between requests, and waits for the workers' requests.
  void shut_down() {
    ::close(listen_fd);
    listen_fd = -1;
    for (auto& [fd, c] : polled) close_connection(*c);
    polled.clear();
    for (auto& [fd, deadline] : refused) ::close(fd);
    refused.clear();
    for (auto& c : waiting) close_connection(*c);
    waiting.clear();
    pool->shutdown();
    take_back();  // closes them: stopping is set
  }
};

ConnectionFront::ConnectionFront(ConnectionLimits limits, Serve serve, ErrorBody error_body, OnAnswer on_answer)
    : impl_(std::make_unique<Impl>(limits, std::move(serve), std::move(error_body), std::move(on_answer))) {}

ConnectionFront::~ConnectionFront() = default;

int ConnectionFront::bind(const std::string& host, int port) { return impl_->bind(host, port); }

int ConnectionFront::listen_fd() const { return impl_->listen_fd; }

void ConnectionFront::run() { impl_->run(); }

void ConnectionFront::stop() {
  impl_->stopping = true;
  impl_->wake();
}

}  // namespace sinklm
