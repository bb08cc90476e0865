// The httplib::Stream a worker serves one request on: it reads the request from memory (the connection
// front has already received all of it, serve/http/connection_front.h) and writes the response to the client's
// socket. So a worker never waits on a client that is slow to send; it waits on writes only, each bounded by
// the write timeout (a client that stops reading loses its response, and its generation is cancelled).
#pragma once
#include <httplib.h>

#include <chrono>
#include <string>

namespace sinklm {

struct Endpoint {
  std::string ip;
  int port = 0;
};

class ClientStream : public httplib::Stream {
 public:
  ClientStream(int fd, std::string request, Endpoint peer, Endpoint local, std::chrono::milliseconds write_timeout);

  bool is_readable() const override { return read_at_ < request_.size(); }
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;  // 0 past the end of the request
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  std::string request_;
  size_t read_at_ = 0;
  Endpoint peer_, local_;
  std::chrono::milliseconds write_timeout_;
};

}  // namespace sinklm
