// The body of POST /v1/completions and /v1/chat/completions, parsed and checked before any work starts.
// Every malformed field is a RequestError (400) naming the field: wrong types, numbers out of range
// (including JSON numbers too large for a double, e.g. 1e999), unknown enum values (roles, content part
// types). Fields sinklm does not know are ignored, as OpenAI does, but listed in `warnings`.
// Nothing here touches a stream.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "decode/generation.h"

namespace sinklm {

struct CompletionLimits {
  int64_t max_tokens_limit = 4096;  // the largest max_tokens a request may ask for
  uint64_t default_seed = 0;        // when the request gives no seed: a fresh draw per request (JobRunner)
};

// One prompt: text (tokenized by the server) or token ids given by the client (OpenAI's `prompt` may be
// an array of ids, what lm-evaluation-harness sends).
struct PromptInput {
  std::string text;
  std::vector<int64_t> ids;
  bool is_ids = false;
};

struct CompletionRequest {
  bool chat = false;
  GenerationRequest generation;     // sampling, stop strings, max_tokens; the prompt ids are added later
  std::vector<PromptInput> prompts;  // chat: one (the messages in the chat template); completions: 1 or more
  int64_t n = 1;                     // choices per prompt; choice j of prompt i has index i * n + j
  bool echo = false;                 // completions: the prompt's text and log-probs come first in each choice
  int64_t logprobs = -1;             // -1: none; k >= 0: each token's log-prob and its k most likely alternatives
  bool stream = false;               // server-sent events
  bool include_usage = false;        // stream_options.include_usage: a last chunk with usage, choices []
  bool stream_state = false;         // "sinklm": {"stream_state": true}: responses carry "sinklm" (the stream)
  std::string session_id;            // "" = a one-off stream
  std::vector<std::string> warnings;  // e.g. "unsupported field 'logit_bias' ignored"
};

// `session_header`: the X-Session-Id header, used when the body has no "session".
// A request body that must be a JSON object: 400 invalid_json otherwise, or invalid_value naming a number out of
// range.
nlohmann::json parse_request_body(const std::string& text);

CompletionRequest parse_completion_request(const std::string& body, bool chat, const std::string& session_header,
                                           const CompletionLimits& limits);

}  // namespace sinklm
