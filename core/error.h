// Two kinds of errors (see README "Errors"):
//  - UserError: bad input (config key, file, request field). The message names the input and gives a hint.
//  - SINKLM_ASSERT: a broken invariant inside sinklm; reports file:line and aborts the operation.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace sinklm {

struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
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

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(::sinklm::str(file, ":", line, ": internal invariant broken: ", expr, (msg.empty() ? "" : " ("),
                          msg, (msg.empty() ? "" : ")")));
}

}  // namespace sinklm

#define SINKLM_ASSERT(cond, ...)                                                      \
  do {                                                                                \
    if (!(cond)) ::sinklm::assert_fail(#cond, __FILE__, __LINE__, ::sinklm::str(__VA_ARGS__)); \
  } while (0)
