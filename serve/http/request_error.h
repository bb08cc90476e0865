// A bad request, with the HTTP status and OpenAI error type/code it maps to. Other UserErrors thrown while
// handling a request are 400 invalid_request_error.
#pragma once
#include <string>

#include "core/error.h"

namespace sinklm {

struct RequestError : UserError {
  RequestError(int status, std::string code, const std::string& message, std::string param = "")
      : UserError(message), status(status), code(std::move(code)), param(std::move(param)) {}
  int status;
  std::string code;   // e.g. "session_not_found", "rate_limit_exceeded"
  std::string param;  // the request field at fault, when there is one (OpenAI's error.param)
};

}  // namespace sinklm
