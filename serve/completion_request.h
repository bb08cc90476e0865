// The body of POST /v1/completions and /v1/chat/completions, parsed and checked before any work starts.
// Every malformed field is a RequestError (400) naming the field; nothing here touches a stream.
#pragma once
#include <cstdint>
#include <string>

#include "serve/generation.h"

namespace sinklm {

struct CompletionLimits {
  int64_t max_tokens_limit = 4096;  // the largest max_tokens a request may ask for
  uint64_t default_seed = 0;        // when the request gives no seed
};

struct CompletionRequest {
  bool chat = false;
  GenerationRequest generation;  // sampling, stop strings, max_tokens; the prompt ids are added later
  std::string prompt_text;       // the prompt (chat: the messages in the chat template)
  bool stream = false;           // server-sent events
  std::string session_id;        // "" = a one-off stream
};

// `session_header`: the X-Session-Id header, used when the body has no "session".
CompletionRequest parse_completion_request(const std::string& body, bool chat, const std::string& session_header,
                                           const CompletionLimits& limits);

}  // namespace sinklm
