#include "serve/completion_request.h"

#include <nlohmann/json.hpp>

#include "serve/request_error.h"

namespace sinklm {
namespace {

using json = nlohmann::json;

// Typed access to optional request fields; wrong types are 400s naming the field.
struct Fields {
  const json& body;
  const json* find(const char* name) const {
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void wrong(const char* name, const char* expected) const {
    throw RequestError(400, "invalid_type", str("'", name, "' must be ", expected));
  }
  double number(const char* name, double fallback, double lo, double hi) const {
    const json* v = find(name);
    if (!v) return fallback;
    if (!v->is_number()) wrong(name, "a number");
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) throw RequestError(400, "invalid_value", str("'", name, "' must be in [", lo, ", ", hi, "], got ", x));
    return x;
  }
  int64_t integer(const char* name, int64_t fallback, int64_t lo, int64_t hi) const {
    const json* v = find(name);
    if (!v) return fallback;
    if (!v->is_number_integer()) wrong(name, "an integer");
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) throw RequestError(400, "invalid_value", str("'", name, "' must be in [", lo, ", ", hi, "], got ", x));
    return x;
  }
  bool boolean(const char* name, bool fallback) const {
    const json* v = find(name);
    if (!v) return fallback;
    if (!v->is_boolean()) wrong(name, "true or false");
    return v->get<bool>();
  }
  std::string string(const char* name, const std::string& fallback) const {
    const json* v = find(name);
    if (!v) return fallback;
    if (!v->is_string()) wrong(name, "a string");
    return v->get<std::string>();
  }
  std::vector<std::string> strings(const char* name) const {  // a string or an array of strings
    const json* v = find(name);
    if (!v) return {};
    if (v->is_string()) return {v->get<std::string>()};
    if (!v->is_array()) wrong(name, "a string or an array of strings");
    std::vector<std::string> out;
    for (const auto& item : *v) {
      if (!item.is_string()) wrong(name, "a string or an array of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  }
};

// The chat template for plain language models: "<Role>: <content>\n" per message, then "Assistant:".
std::string chat_prompt(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    throw RequestError(400, "invalid_type", "'messages' must be a non-empty array of {\"role\", \"content\"}");
  std::string text;
  for (const auto& m : *it) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      throw RequestError(400, "invalid_type", "every message must be {\"role\": string, \"content\": string}");
    const std::string role = m["role"].get<std::string>();
    const char* label = role == "system" ? "System" : role == "user" ? "User" : role == "assistant" ? "Assistant" : nullptr;
    if (!label) throw RequestError(400, "invalid_value", str("message role '", role, "': expected system, user or assistant"));
    text += str(label, ": ", m["content"].get<std::string>(), "\n");
  }
  return text + "Assistant:";
}

std::string completion_prompt(const json& body) {
  auto it = body.find("prompt");
  if (it != body.end() && it->is_string()) return it->get<std::string>();
  if (it != body.end() && it->is_array() && it->size() == 1 && (*it)[0].is_string()) return (*it)[0].get<std::string>();
  throw RequestError(400, "invalid_type", "'prompt' must be a string (or an array holding one string)");
}

json parse_body(const std::string& text) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {  // syntax errors, and numbers out of range (1e999)
    throw RequestError(400, "invalid_json", str("the request body is not valid JSON: ", e.what()));
  }
  if (!body.is_object()) throw RequestError(400, "invalid_json", "the request body must be a JSON object");
  return body;
}

}  // namespace

CompletionRequest parse_completion_request(const std::string& text, bool chat, const std::string& session_header,
                                           const CompletionLimits& limits) {
  const json body = parse_body(text);
  Fields f{body};
  if (f.integer("n", 1, 1, 1) != 1) throw RequestError(400, "invalid_value", "'n' must be 1");
  CompletionRequest r;
  r.chat = chat;
  GenerationRequest& g = r.generation;
  g.max_tokens = f.integer("max_tokens", 16, 1, limits.max_tokens_limit);
  if (chat && f.find("max_completion_tokens")) g.max_tokens = f.integer("max_completion_tokens", 16, 1, limits.max_tokens_limit);
  g.sampling.temperature = f.number("temperature", 1.0, 0, 2);
  g.sampling.top_p = f.number("top_p", 1.0, 1e-9, 1);
  g.sampling.top_k = f.integer("top_k", 0, 0, 1 << 24);
  g.sampling.seed = static_cast<uint64_t>(f.integer("seed", static_cast<int64_t>(limits.default_seed), INT64_MIN, INT64_MAX));
  g.stop = f.strings("stop");
  if (g.stop.size() > 4) throw RequestError(400, "invalid_value", "'stop' holds at most 4 strings");
  for (const auto& s : g.stop)
    if (s.empty()) throw RequestError(400, "invalid_value", "'stop' strings must not be empty");
  if (chat) g.stop.push_back("\nUser:");
  r.stream = f.boolean("stream", false);
  r.session_id = f.string("session", session_header);
  r.prompt_text = chat ? chat_prompt(body) : completion_prompt(body);
  return r;
}

}  // namespace sinklm
