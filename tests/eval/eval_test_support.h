// What the eval unit tests share.
#pragma once
#include <string>

#include "core/error.h"

namespace sinklm {

// The UserError message of `f`, "" when it does not throw one.
template <typename F>
std::string user_error(F f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace sinklm
