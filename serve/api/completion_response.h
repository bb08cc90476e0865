// The OpenAI API's JSON for what a job produced (serve/api/completion_job.h): whole responses, streamed chunks as
// server-sent events, log-prob objects, usage, errors, and sinklm's "stream" extension.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "serve/api/completion_job.h"
#include "serve/http/request_error.h"

namespace sinklm {

// Objects keep their keys in insertion order: top_logprobs lists the most likely alternative first.
using json = nlohmann::ordered_json;

// Generated text need not be valid UTF-8 (a model can emit any bytes): invalid sequences become U+FFFD.
std::string dump(const json& value);
// {"error": {"message", "type", "param", "code"}}, the type following the status.
json error_body(int status, const std::string& message, const std::string& code, const std::string& param = "");
// The HTTP error of a choice that ended with "error".
RequestError failure_error(GenerationFailure why, const std::string& message);
// What a client is told when the server's storage failed: 507 storage_full, or 503 storage_error (both with
// Retry-After). Generic on purpose: the file and the errno go to the server's log only.
RequestError storage_error(bool full);
int64_t unix_time();

// What a streamed response has sent of each choice.
struct StreamProgress {
  explicit StreamProgress(size_t choices) : started(choices, false), text_offset(choices, 0), completion_tokens(choices, 0) {}
  std::vector<bool> started;
  std::vector<int64_t> text_offset, completion_tokens;
};

class CompletionResponse {
 public:
  CompletionResponse(const TextCodec& codec, std::string model_name) : codec_(codec), model_name_(std::move(model_name)) {}

  // The non-streamed response body; throws failure_error for a choice that ended with "error".
  json whole(const Job& job, const std::vector<ChoiceResult>& results) const;
  // One server-sent event: choice `i`'s delta `d` as a chunk.
  std::string chunk_event(const Job& job, size_t i, const GenerationDelta& d, StreamProgress& progress) const;
  // The event carrying the usage of every choice (stream_options.include_usage).
  std::string usage_event(const Job& job, const StreamProgress& progress) const;

 private:
  std::string token_bytes(int64_t id) const { return codec_.decode({id}); }
  std::vector<std::string> names_of(const TokenLogprob& e) const;
  json completion_logprobs(const std::vector<TokenLogprob>& entries, int64_t offset) const;
  json chat_logprobs(const std::vector<TokenLogprob>& entries) const;
  json chunk_json(const Job& job, const Choice& c, const GenerationDelta& d, bool first, int64_t text_offset) const;

  const TextCodec& codec_;
  const std::string model_name_;
};

}  // namespace sinklm
