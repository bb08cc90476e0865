#include "serve/api/completion_request.h"

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "serve/http/request_error.h"

namespace sinklm {
namespace {

using json = nlohmann::json;

[[noreturn]] void invalid(const std::string& field, const std::string& what) {
  throw RequestError(400, "invalid_value", str("'", field, "' ", what), field);
}

// Typed access to optional request fields; wrong types and values out of range are 400s naming the field.
struct Fields {
  const json& body;
  const json* find(const char* name) const {
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void wrong(const char* name, const char* expected) const {
    throw RequestError(400, "invalid_type", str("'", name, "' must be ", expected), name);
  }
  double number(const char* name, double fallback, double lo, double hi) const {
    const json* v = find(name);
    if (!v) return fallback;
    if (!v->is_number()) wrong(name, "a number");
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) invalid(name, str("must be in [", lo, ", ", hi, "], got ", x));
    return x;
  }
  int64_t integer(const char* name, int64_t fallback, int64_t lo, int64_t hi) const {
    const json* v = find(name);
    if (!v) return fallback;
    if (!v->is_number_integer()) wrong(name, "an integer");
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      invalid(name, str("must be in [", lo, ", ", hi, "], got ", v->get<uint64_t>()));
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) invalid(name, str("must be in [", lo, ", ", hi, "], got ", x));
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

// Message content: a string, or an array of parts of which only {"type": "text", "text": "..."} is
// supported (what current OpenAI SDKs send); the texts are joined.
std::string message_content(const json& content, const std::string& field) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw RequestError(400, "invalid_type", str("'", field, "' must be a string or an array of text parts"), field);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string at = str(field, "[", j, "]");
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw RequestError(400, "invalid_type", str("'", at, "' must be {\"type\": \"text\", \"text\": string}"), at);
    const std::string type = part["type"].get<std::string>();
    if (type != "text") invalid(at + ".type", str("'", type, "' is not supported: only 'text' parts are"));
    if (!part.contains("text") || !part["text"].is_string())
      throw RequestError(400, "invalid_type", str("'", at, ".text' must be a string"), at + ".text");
    text += part["text"].get<std::string>();
  }
  return text;
}

// The chat template for plain language models: "<Role>: <content>\n" per message, then "Assistant:".
std::string chat_prompt(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    throw RequestError(400, "invalid_type", "'messages' must be a non-empty array of {\"role\", \"content\"}", "messages");
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string at = str("messages[", i, "]");
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content"))
      throw RequestError(400, "invalid_type", str("'", at, "' must be {\"role\": string, \"content\": string or text parts}"), at);
    const std::string role = m["role"].get<std::string>();
    const char* label = role == "system" || role == "developer" ? "System"
                        : role == "user"                      ? "User"
                        : role == "assistant"                 ? "Assistant"
                                                              : nullptr;
    if (!label) invalid(at + ".role", str("'", role, "': expected system, developer, user or assistant"));
    text += str(label, ": ", message_content(m["content"], at + ".content"), "\n");
  }
  return text + "Assistant:";
}

// `prompt`: a string, an array of strings, an array of token ids, or an array of arrays of token ids.
std::vector<PromptInput> completion_prompts(const json& body) {
  auto it = body.find("prompt");
  const char* expected = "'prompt' must be a string, an array of strings, an array of token ids or an array of arrays of token ids";
  if (it == body.end() || !(it->is_string() || it->is_array())) throw RequestError(400, "invalid_type", expected, "prompt");
  auto ids_of = [&](const json& array) {
    PromptInput p;
    p.is_ids = true;
    for (const auto& id : array) {
      if (!id.is_number_integer()) throw RequestError(400, "invalid_type", expected, "prompt");
      p.ids.push_back(id.get<int64_t>());
    }
    if (p.ids.empty()) invalid("prompt", "must not be an empty list of token ids");
    return p;
  };
  if (it->is_string()) return {PromptInput{it->get<std::string>(), {}, false}};
  if (it->empty()) invalid("prompt", "must not be an empty array");
  if ((*it)[0].is_number_integer()) return {ids_of(*it)};
  std::vector<PromptInput> prompts;
  for (const auto& item : *it) {
    if (item.is_string()) prompts.push_back({item.get<std::string>(), {}, false});
    else if (item.is_array()) prompts.push_back(ids_of(item));
    else throw RequestError(400, "invalid_type", expected, "prompt");
  }
  return prompts;
}

// Records the path of the value being parsed, so a number the parser rejects (1e999 overflows a double)
// is reported with its field name.
struct FieldTracker : nlohmann::json_sax<json> {
  std::vector<std::string> path;
  std::vector<int64_t> index;  // per open container: -1 for an object, the next element's index for an array
  std::string failed_at;
  void value() {
    if (!index.empty() && index.back() >= 0) ++index.back();
  }
  bool null() override { return value(), true; }
  bool boolean(bool) override { return value(), true; }
  bool number_integer(number_integer_t) override { return value(), true; }
  bool number_unsigned(number_unsigned_t) override { return value(), true; }
  bool number_float(number_float_t, const string_t&) override { return value(), true; }
  bool string(string_t&) override { return value(), true; }
  bool binary(binary_t&) override { return value(), true; }
  bool start_object(std::size_t) override { return open(-1), true; }
  bool key(string_t& k) override {
    path.back() = k;
    return true;
  }
  bool end_object() override { return close(), true; }
  bool start_array(std::size_t) override { return open(0), true; }
  bool end_array() override { return close(), true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    std::string field;
    for (size_t i = 0; i < path.size(); ++i)
      field += index[i] >= 0 ? str("[", index[i], "]") : (field.empty() ? "" : ".") + path[i];
    failed_at = field;
    return false;
  }
  void open(int64_t kind) {
    path.emplace_back();
    index.push_back(kind);
  }
  void close() {
    path.pop_back();
    index.pop_back();
    value();
  }
};


// Fields whose request sinklm would answer wrongly if it ignored them: refused with 400 unsupported_parameter
// naming the field, unless given their no-op value (clients that send every default keep working).
void refuse_unsupported(const json& body) {
  struct Refused {
    const char* field;
    bool (*no_op)(const json&);
    const char* why;
  };
  static const Refused refused[] = {
      {"tools", [](const json& v) { return v.is_null() || (v.is_array() && v.empty()); }, "sinklm serves a language model without tool calling"},
      {"tool_choice", [](const json& v) { return v.is_null() || v == "none"; }, "sinklm serves a language model without tool calling"},
      {"functions", [](const json& v) { return v.is_null() || (v.is_array() && v.empty()); }, "sinklm serves a language model without function calling"},
      {"function_call", [](const json& v) { return v.is_null() || v == "none"; }, "sinklm serves a language model without function calling"},
      {"response_format", [](const json& v) { return v.is_null() || (v.is_object() && v.value("type", "") == "text"); },
       "sinklm has no constrained decoding (JSON mode or schemas); only {\"type\": \"text\"}"},
      {"suffix", [](const json& v) { return v.is_null() || v == ""; }, "sinklm does not fill in the middle"},
      {"best_of", [](const json& v) { return v.is_null() || v == 1; }, "sinklm returns the n samples it draws; use n"},
  };
  for (const Refused& r : refused) {
    auto it = body.find(r.field);
    if (it != body.end() && !r.no_op(*it))
      throw RequestError(400, "unsupported_parameter", str("'", r.field, "' is not supported: ", r.why, "; leave it out"),
                         r.field);
  }
}

// logit_bias: {"<token id>": bias in [-100, 100]} (the ids as strings, as OpenAI's); the ids are checked against
// the vocabulary where it is known (JobRunner).
std::vector<std::pair<int64_t, double>> logit_bias(const Fields& f) {
  std::vector<std::pair<int64_t, double>> out;
  const json* bias = f.find("logit_bias");
  if (!bias) return out;
  if (!bias->is_object()) f.wrong("logit_bias", "an object of token id (a string) -> bias");
  for (const auto& [key, value] : bias->items()) {
    const std::string field = "logit_bias." + key;
    char* end = nullptr;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0) invalid(field, "must name a token id, a non-negative integer");
    if (!value.is_number()) throw RequestError(400, "invalid_type", str("'", field, "' must be a number"), field);
    const double b = value.get<double>();
    if (!(b >= -100 && b <= 100)) invalid(field, str("must be in [-100, 100], got ", b));
    out.emplace_back(id, b);
  }
  return out;
}

std::vector<std::string> unknown_fields(const json& body, const std::set<std::string>& known) {
  std::vector<std::string> warnings;
  for (const auto& [key, value] : body.items())
    if (!known.count(key)) warnings.push_back(str("unsupported field '", key, "' ignored"));
  return warnings;
}

}  // namespace

json parse_request_body(const std::string& text) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {  // syntax errors, and numbers out of range (1e999)
    FieldTracker tracker;
    json::sax_parse(text, &tracker, json::input_format_t::json, /*strict=*/true);
    if (!tracker.failed_at.empty() && dynamic_cast<const json::out_of_range*>(&e))
      invalid(tracker.failed_at, str("is out of range: ", e.what()));
    throw RequestError(400, "invalid_json", str("the request body is not valid JSON: ", e.what()));
  }
  if (!body.is_object()) throw RequestError(400, "invalid_json", "the request body must be a JSON object");
  return body;
}

CompletionRequest parse_completion_request(const std::string& text, bool chat, const std::string& session_header,
                                           const CompletionLimits& limits) {
  const json body = parse_request_body(text);
  Fields f{body};
  CompletionRequest r;
  r.chat = chat;
  r.n = f.integer("n", 1, 1, 64);
  GenerationRequest& g = r.generation;
  if (chat) {
    g.max_tokens = f.integer("max_tokens", 16, 1, limits.max_tokens_limit);
    if (f.find("max_completion_tokens")) g.max_tokens = f.integer("max_completion_tokens", 16, 1, limits.max_tokens_limit);
    const bool logprobs = f.boolean("logprobs", false);
    const int64_t top = f.integer("top_logprobs", 0, 0, 20);
    if (f.find("top_logprobs") && !logprobs) invalid("top_logprobs", "needs 'logprobs': true");
    r.logprobs = logprobs ? top : -1;
  } else {
    r.echo = f.boolean("echo", false);
    r.logprobs = f.integer("logprobs", -1, 0, 20);
    g.max_tokens = f.integer("max_tokens", 16, 0, limits.max_tokens_limit);
    if (g.max_tokens == 0 && !r.echo) invalid("max_tokens", "must be at least 1 unless 'echo' is true");
  }
  g.sampling.temperature = f.number("temperature", 1.0, 0, 2);
  g.sampling.top_p = f.number("top_p", 1.0, 1e-9, 1);
  g.sampling.top_k = f.integer("top_k", 0, 0, 1 << 24);
  g.sampling.seed = static_cast<uint64_t>(f.integer("seed", static_cast<int64_t>(limits.default_seed), INT64_MIN, INT64_MAX));
  g.sampling.presence_penalty = f.number("presence_penalty", 0, -2, 2);
  g.sampling.frequency_penalty = f.number("frequency_penalty", 0, -2, 2);
  g.sampling.logit_bias = logit_bias(f);
  g.stop = f.strings("stop");
  if (g.stop.size() > 4) invalid("stop", "holds at most 4 strings");
  for (const auto& s : g.stop)
    if (s.empty()) invalid("stop", "strings must not be empty");
  if (chat) g.stop.push_back("\nUser:");
  r.stream = f.boolean("stream", false);
  if (const json* options = f.find("stream_options")) {
    if (!options->is_object()) f.wrong("stream_options", "an object");
    if (!r.stream) invalid("stream_options", "is only allowed with 'stream': true");
    Fields o{*options};
    r.include_usage = o.boolean("include_usage", false);
    for (const auto& w : unknown_fields(*options, {"include_usage"})) r.warnings.push_back("stream_options: " + w);
  }
  if (const json* extension = f.find("sinklm")) {  // sinklm's options, apart from OpenAI's fields
    if (!extension->is_object()) f.wrong("sinklm", "an object");
    Fields o{*extension};
    r.stream_state = o.boolean("stream_state", false);
    for (const auto& w : unknown_fields(*extension, {"stream_state"})) r.warnings.push_back("sinklm: " + w);
  }
  r.session_id = f.string("session", session_header);
  if (chat) r.prompts = {PromptInput{chat_prompt(body), {}, false}};
  else r.prompts = completion_prompts(body);
  if (!r.session_id.empty() && r.prompts.size() * r.n > 1)
    invalid("n", "must be 1, with one prompt, when continuing a session (a session is one stream)");
  refuse_unsupported(body);
  const std::set<std::string> common = {"model", "max_tokens", "temperature", "top_p", "top_k", "n", "stream",
                                        "stream_options", "logprobs", "stop", "seed", "session", "user", "sinklm", "tools",
                                        "tool_choice", "functions", "function_call", "response_format", "suffix",
                                        "best_of", "logit_bias", "presence_penalty", "frequency_penalty"};
  std::set<std::string> known = common;
  const std::vector<std::string> own = chat ? std::vector<std::string>{"messages", "max_completion_tokens", "top_logprobs"}
                                            : std::vector<std::string>{"prompt", "echo"};
  known.insert(own.begin(), own.end());
  auto unknown = unknown_fields(body, known);
  r.warnings.insert(r.warnings.begin(), unknown.begin(), unknown.end());
  return r;
}

}  // namespace sinklm
