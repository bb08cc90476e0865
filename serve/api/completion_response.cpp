#include "serve/api/completion_response.h"

#include <chrono>

#include "serve/api/token_names.h"

namespace sinklm {
namespace {

const char* error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 404) return "not_found_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

// Usage totals over a request's choices.
json usage_of(const Job& job, const std::vector<int64_t>& completion_tokens) {
  int64_t prompt = 0, completion = 0;
  for (size_t i = 0; i < job.choices.size(); ++i) {
    prompt += job.choices[i]->prompt_tokens;
    completion += completion_tokens[i];
  }
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

// sinklm's extension of a response, under its own key "sinklm" and only when the request asks for it
// ("sinklm": {"stream_state": true}): the stream behind it (the first choice's), after this request, or (a
// streamed chunk) after that chunk. OpenAI's objects otherwise carry OpenAI's keys alone.
json stream_info(const Job& job, int64_t stream_length, int64_t kv_entries) {
  return {{"session", job.session ? json(job.session->id) : json()}, {"stream_length", stream_length},
          {"kv_entries", kv_entries}};
}
json stream_info(const Job& job) { return stream_info(job, job.stream_length, job.kv_entries); }

const char* chunk_object(const Job& job) { return job.chat ? "chat.completion.chunk" : "text_completion"; }

}  // namespace

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_body(int status, const std::string& message, const std::string& code, const std::string& param) {
  return {{"error",
           {{"message", message}, {"type", error_type(status)}, {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}}}};
}

RequestError failure_error(GenerationFailure why, const std::string& message) {
  switch (why) {
    case GenerationFailure::ServerStopping:
      return RequestError(503, "server_stopped", message + " (a session keeps every token generated; retry on another instance)");
    case GenerationFailure::StepFailed: return RequestError(500, "internal_error", message);
    case GenerationFailure::Cancelled: return RequestError(400, "cancelled", message);
    case GenerationFailure::StorageFull: return storage_error(true);
    case GenerationFailure::StorageFailed: return storage_error(false);
    default: return RequestError(400, "context_length_exceeded", message);
  }
}

RequestError storage_error(bool full) {
  if (full) return RequestError(507, "storage_full", "the server's storage is full; retry later");
  return RequestError(503, "storage_error", "the server could not write to its storage; retry later");
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The names of an entry's alternatives, then of its token (token_names.h). Every id in logprobs decodes:
// prompt ids are checked against the vocabulary, sinks come before the echoed part, and neither sampling nor
// the alternatives leave the sampleable ids.
std::vector<std::string> CompletionResponse::names_of(const TokenLogprob& e) const {
  std::vector<std::pair<int64_t, std::string>> tokens;
  for (const auto& [id, lp] : e.top) tokens.emplace_back(id, token_bytes(id));
  tokens.emplace_back(e.id, token_bytes(e.id));
  return position_names(tokens);
}

// The completions API's logprobs object for `entries`; `offset`: text_offset of the first.
json CompletionResponse::completion_logprobs(const std::vector<TokenLogprob>& entries, int64_t offset) const {
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& e : entries) {
    const auto names = names_of(e);
    tokens.push_back(names.back());
    values.push_back(e.scored ? json(e.logprob) : json());
    json top = e.scored ? json::object() : json();
    for (size_t i = 0; i < e.top.size(); ++i) top[names[i]] = e.top[i].second;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += token_bytes(e.id).size();  // offsets count the text's bytes, not the names'
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// The chat API's logprobs object: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
// Names as in completions; `bytes` gives every token's bytes, as OpenAI's do.
json CompletionResponse::chat_logprobs(const std::vector<TokenLogprob>& entries) const {
  auto item = [&](const std::string& name, int64_t id, double lp) {
    json bytes = json::array();
    for (unsigned char b : token_bytes(id)) bytes.push_back(static_cast<int>(b));
    return json{{"token", name}, {"logprob", lp}, {"bytes", bytes}};
  };
  json content = json::array();
  for (const auto& e : entries) {
    const auto names = names_of(e);
    json entry = item(names.back(), e.id, e.logprob), top = json::array();
    for (size_t i = 0; i < e.top.size(); ++i) top.push_back(item(names[i], e.top[i].first, e.top[i].second));
    entry["top_logprobs"] = top;
    content.push_back(entry);
  }
  return {{"content", content}};
}

json CompletionResponse::whole(const Job& job, const std::vector<ChoiceResult>& results) const {
  json choices = json::array();
  std::vector<int64_t> completion_tokens;
  for (size_t i = 0; i < results.size(); ++i) {
    const ChoiceResult& r = results[i];
    const Choice& c = *job.choices[i];
    if (r.finish == "error") throw failure_error(r.failure, r.error);
    completion_tokens.push_back(r.completion_tokens);
    json choice = {{"index", c.index}, {"finish_reason", r.finish}, {"logprobs", nullptr}};
    if (job.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", r.text}};
      if (job.logprobs >= 0) choice["logprobs"] = chat_logprobs(r.logprobs);
    } else {
      choice["text"] = c.echo_text + r.text;
      if (job.logprobs >= 0) choice["logprobs"] = completion_logprobs(r.logprobs, job.echo ? 0 : c.echo_text.size());
    }
    choices.push_back(choice);
  }
  json out = {{"id", job.id}, {"object", job.chat ? "chat.completion" : "text_completion"}, {"created", job.created},
              {"model", model_name_}, {"choices", choices}, {"usage", usage_of(job, completion_tokens)}};
  if (job.stream_state) out["sinklm"] = stream_info(job);
  return out;
}

json CompletionResponse::chunk_json(const Job& job, const Choice& c, const GenerationDelta& d, bool first,
                                    int64_t text_offset) const {
  json choice = {{"index", c.index}, {"finish_reason", d.finish_reason.empty() ? json() : json(d.finish_reason)}};
  if (job.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!d.text.empty()) delta["content"] = d.text;
    choice["delta"] = delta;
    choice["logprobs"] = job.logprobs >= 0 && !d.logprobs.empty() ? chat_logprobs(d.logprobs) : json();
  } else {
    choice["text"] = (first ? c.echo_text : "") + d.text;
    choice["logprobs"] = job.logprobs >= 0 ? completion_logprobs(d.logprobs, text_offset) : json();
  }
  json out = {{"id", job.id}, {"object", chunk_object(job)}, {"created", job.created}, {"model", model_name_},
              {"choices", json::array({choice})}};
  // No usage here, even on a finish chunk: as OpenAI and vLLM do, a stream reports usage once, in the last
  // chunk (usage_event), and only when stream_options.include_usage asks, so a client summing it counts once.
  if (job.stream_state)
    out["sinklm"] = d.finish_reason.empty() ? stream_info(job, d.stream_length, d.kv_entries) : stream_info(job);
  return out;
}

std::string CompletionResponse::chunk_event(const Job& job, size_t i, const GenerationDelta& d,
                                            StreamProgress& progress) const {
  const bool first = !progress.started[i];
  std::string event = "data: " + dump(chunk_json(job, *job.choices[i], d, first, progress.text_offset[i])) + "\n\n";
  progress.started[i] = true;
  for (const auto& e : d.logprobs) progress.text_offset[i] += token_bytes(e.id).size();
  progress.completion_tokens[i] = d.completion_tokens;
  return event;
}

std::string CompletionResponse::usage_event(const Job& job, const StreamProgress& progress) const {
  return "data: " + dump(json{{"id", job.id}, {"object", chunk_object(job)}, {"created", job.created},
                              {"model", model_name_}, {"choices", json::array()},
                              {"usage", usage_of(job, progress.completion_tokens)}}) + "\n\n";
}

}  // namespace sinklm
