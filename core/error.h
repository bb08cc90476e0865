// Two kinds of errors (see README "Errors"):
//  - UserError: bad input (config key, file, request field). The message names the input and gives a hint.
//  - SINKLM_ASSERT: a broken invariant inside sinklm; reports file:line and aborts the operation.
#pragma once
#include <cerrno>
#include <sstream>
#include <stdexcept>
#include <string>

namespace sinklm {

struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A file that could not be written or made durable (disk full, an I/O error): the machine's fault, not the
// input's. The message names the file and the errno; a server tells its client only whether storage is full
// (serve/openai_server.cpp) and keeps the path for its log.
struct StorageError : UserError {
  StorageError(int error_number, const std::string& message) : UserError(message), error_number(error_number) {}
  bool full() const { return error_number == ENOSPC || error_number == EDQUOT || error_number == EFBIG; }
  int error_number;
};

struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

template <typename... Parts>
std::string str(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  throw UserError(::sinklm::str(parts...));
}

// Throws StorageError for errno `error_number` (read it before any other call can change errno).
template <typename... Parts>
[[noreturn]] void fail_storage(int error_number, const Parts&... parts) {
  throw StorageError(error_number, ::sinklm::str(parts...));
}

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(::sinklm::str(file, ":", line, ": internal invariant broken: ", expr, (msg.empty() ? "" : " ("),
                          msg, (msg.empty() ? "" : ")")));
}

}  // namespace sinklm

#define SINKLM_ASSERT(cond, ...)                                                      \
  do {                                                                                \
    if (!(cond)) ::sinklm::assert_fail(#cond, __FILE__, __LINE__, ::sinklm::str(__VA_ARGS__)); \
  } while (0)
