// The message of the UserError a piece of code throws: what the C++ tests check errors by.
#pragma once
#include <functional>
#include <string>

#include "core/error.h"

namespace sinklm::testing_support {

// The UserError message thrown by body, or "" if it did not throw one.
inline std::string user_error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace sinklm::testing_support
