#include "serve/http/client_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sinklm {
namespace {

// Waits until `fd` can take more bytes; false on timeout or a socket error (the client is gone).
bool wait_writable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLOUT, 0};
  for (;;) {
    const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n < 0 && errno == EINTR) continue;
    return n > 0 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
  }
}

}  // namespace

ClientStream::ClientStream(int fd, std::string request, Endpoint peer, Endpoint local,
                           std::chrono::milliseconds write_timeout)
    : fd_(fd), request_(std::move(request)), peer_(std::move(peer)), local_(std::move(local)),
      write_timeout_(write_timeout) {}

bool ClientStream::is_writable() const { return wait_writable(fd_, write_timeout_); }

ssize_t ClientStream::read(char* ptr, size_t size) {
  const size_t n = std::min(size, request_.size() - read_at_);
  std::memcpy(ptr, request_.data() + read_at_, n);
  read_at_ += n;
  return static_cast<ssize_t>(n);
}

// The socket is non-blocking (the front polls it); a write waits for room up to the write timeout.
// Failures are not reported here: httplib sees -1 and ends the response (the client went away or stalled).
ssize_t ClientStream::write(const char* ptr, size_t size) {
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_writable(fd_, write_timeout_)) return -1;
    } else {
      return -1;
    }
  }
  return static_cast<ssize_t>(sent);
}

void ClientStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip = peer_.ip;
  port = peer_.port;
}

void ClientStream::get_local_ip_and_port(std::string& ip, int& port) const {
  ip = local_.ip;
  port = local_.port;
}

}  // namespace sinklm
