#include "serve/openai_server.h"

#include <httplib.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <thread>
#include <nlohmann/json.hpp>

#include "serve/api_key.h"
#include "serve/chat_page.h"
#include "serve/completion_request.h"
#include "serve/connection_front.h"
#include "serve/generation_worker.h"
#include "serve/request_error.h"
#include "serve/server_metrics.h"
#include "serve/token_names.h"

namespace sinklm {
namespace {

// How long stop() waits for responses to send the tokens generated before it (a client reading them takes
// milliseconds; one that stopped reading is cut when this runs out).
constexpr double kStopFlushSeconds = 2;

// Objects keep their keys in insertion order: top_logprobs lists the most likely alternative first.
using json = nlohmann::ordered_json;

const char* error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 404) return "not_found_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

json error_body(int status, const std::string& message, const std::string& code, const std::string& param = "") {
  return {{"error",
           {{"message", message}, {"type", error_type(status)}, {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}}}};
}

// Generated text need not be valid UTF-8 (a model can emit any bytes): invalid sequences become U+FFFD.
std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The metrics label of a path: known routes, else "other" (unknown paths must not create new series).
std::string route_label(const std::string& path) {
  for (const char* route : {"/health", "/metrics", "/v1/models", "/v1/sessions", "/v1/completions", "/v1/chat/completions"})
    if (path == route) return path;
  for (const StaticFile& file : chat_page_files())
    if (path == file.path) return path;
  return path.rfind("/v1/sessions/", 0) == 0 ? "/v1/sessions/{id}" : "other";
}

// The page may load its own script, style and icon and talk to this server, nothing else: no inline script
// or style (so text that slipped into markup still could not run), no other origin, no framing, no forms
// posting elsewhere, no plugins. Model output is inserted as text by chat.js; this is the second wall.
constexpr const char* kPagePolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// httplib routes are regular expressions: "/chat.js" must not also match "/chatXjs".
std::string literal_route(const std::string& path) {
  std::string pattern;
  for (char c : path) pattern += c == '.' ? std::string("\\.") : std::string(1, c);
  return pattern;
}

void send_page_file(const StaticFile& file, httplib::Response& res) {
  res.set_header("Content-Security-Policy", kPagePolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Cache-Control", "no-cache");  // a new binary's page replaces the old one at the next load
  res.set_content(file.body.data(), file.body.size(), file.content_type);
}

// One choice of a request: a generation on its own stream or (n = 1) on the request's session stream.
struct Choice {
  int64_t index = 0;
  std::unique_ptr<DecoderStream> own_stream;
  std::shared_ptr<Generation> generation;
  std::string echo_text;        // the prompt's text, sent first when echoing
  int64_t prompt_tokens = 0;    // counted in usage once per prompt (the first choice of each)
  int64_t tokens_counted = 0;   // completion tokens already added to the metrics (worker thread only)
  bool finished = false;        // under Job::mutex
};

// One request's generations and the deltas the worker produced, in order, tagged with their choice.
struct Job {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::pair<size_t, GenerationDelta>> deltas;
  size_t unfinished = 0;
  std::vector<std::unique_ptr<Choice>> choices;
  std::shared_ptr<Session> session;
  std::atomic<bool> session_handed_back{false};
  std::string id;
  int64_t created = 0;
  bool chat = false, streaming = false, include_usage = false, echo = false;
  int64_t logprobs = -1;
  std::vector<std::string> warnings;
  int64_t stream_length = 0, kv_entries = 0;  // the first choice's stream when it finished
  bool done() const { return unfinished == 0; }
};

// The HTTP error of a choice that ended with "error".
RequestError failure_error(GenerationFailure why, const std::string& message) {
  switch (why) {
    case GenerationFailure::ServerStopping:
      return RequestError(503, "server_stopped", message + " (a session keeps every token generated; retry on another instance)");
    case GenerationFailure::StepFailed: return RequestError(500, "internal_error", message);
    case GenerationFailure::Cancelled: return RequestError(400, "cancelled", message);
    default: return RequestError(400, "context_length_exceeded", message);
  }
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

// httplib's Server with its request processing opened up: the connection front (serve/connection_front.h)
// accepts and reads requests, and runs each complete one through the routes here.
class FrontedHttpServer : public httplib::Server {
 public:
  bool serve(httplib::Stream& stream, bool close, bool& closed, const std::function<void(httplib::Request&)>& setup) {
    return process_request(stream, close, closed, setup);
  }
  // httplib ends streamed responses once its listening socket is invalid: that is how stop() reaches them.
  void set_serving(socket_t listening) { svr_sock_ = listening; }
};

ConnectionLimits connection_limits(const ServerOptions& o) {
  ConnectionLimits limits = o.connections;
  limits.threads = o.http_threads;
  limits.max_body_bytes = o.max_body_bytes;
  return limits;
}

}  // namespace

struct OpenAiServer::Impl {
  ServerOptions options;
  const ApiKey api_key;
  CachedDecoder& decoder;
  const TextCodec& codec;
  SessionStore& sessions;
  ServerMetrics metrics;
  GenerationWorker worker;
  FrontedHttpServer http;
  ConnectionFront front;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> draining{false};     // SIGTERM: new requests get 503, running ones finish
  std::atomic<int64_t> in_flight{0};     // requests a worker is serving, streamed responses to their end
  const std::unique_ptr<KvCachePolicy> policy;  // every session's (the model card, K/V entries of a session)

  Impl(ServerOptions o, CachedDecoder& d, const TextCodec& c, SessionStore& s)
      : options(std::move(o)), api_key(options.api_key), decoder(d), codec(c), sessions(s),
        worker(d, options.prefill_chunk, metrics),
        front(connection_limits(options), [this](httplib::Stream& s, bool close, bool continue_sent) { return serve(s, close, continue_sent); },
              [](int status, const std::string& code, const std::string& message) { return dump(error_body(status, message, code)); },
              [this](int status) { metrics.count_response("connection", status); }),
        policy(make_cache_policy(s.settings().cache, d.config())) {
    http.set_payload_max_length(options.max_body_bytes);
    http.set_keep_alive_timeout(static_cast<time_t>(std::lround(options.connections.idle_timeout_s)));
    http.set_keep_alive_max_count(options.connections.max_requests_per_connection);
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (res.body.empty()) {
        const std::string message = res.status == 413 ? str("the request body exceeds ", options.max_body_bytes, " bytes")
                                    : res.status == 404 ? str("no route for ", req.method, " ", req.path)
                                                        : str("HTTP ", res.status);
        res.set_content(dump(error_body(res.status, message, res.status == 413 ? "body_too_large" : "")),
                        "application/json");
      }
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics.count_response(route_label(req.path), res.status);
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (draining) res.status = 503;  // a load balancer stops sending here
      res.set_content(draining ? R"({"status":"draining"})" : R"({"status":"ok"})", "application/json");
    });
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!draining || req.path == "/health" || req.path == "/metrics") return httplib::Server::HandlerResponse::Unhandled;
      res.status = 503;
      res.set_header("Retry-After", std::to_string(options.connections.retry_after_s));
      res.set_content(dump(error_body(503, "the server is shutting down; retry shortly (on another instance)", "server_draining")),
                      "application/json");
      return httplib::Server::HandlerResponse::Handled;
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      const KvUsage idle = sessions.idle_kv();
      res.set_content(metrics.render(sessions.in_memory(), sessions.on_disk(), idle.entries, idle.bytes),
                      "text/plain; version=0.0.4");
    });
    guarded_get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json model = {{"id", options.model_name}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "sinklm"},
                    {"sinklm", model_card()}};
      res.set_content(dump(json{{"object", "list"}, {"data", json::array({model})}}), "application/json");
    });
    guarded_post("/v1/sessions", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump(json{{"id", sessions.create()}, {"object", "session"}}), "application/json");
    });
    guarded_get(R"(/v1/sessions/([A-Za-z0-9_-]+))", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string id = req.matches[1];
      const auto tokens = sessions.history(id);
      std::vector<int64_t> text_ids;  // sink tokens have no text
      for (int64_t t : tokens)
        if (t < codec.vocab_size()) text_ids.push_back(t);
      // K/V entries as the policy holds them for the whole logged stream (also for a session still on disk).
      const int64_t kv_entries = policy->entries_after(static_cast<int64_t>(tokens.size()));
      res.set_content(dump(json{{"id", id}, {"object", "session"}, {"tokens", tokens.size()}, {"kv_entries", kv_entries},
                                {"text", codec.decode(text_ids)}}),
                      "application/json");
    });
    http.Delete(R"(/v1/sessions/([A-Za-z0-9_-]+))", [this](const httplib::Request& req, httplib::Response& res) {
      guard(req, res, [&] {
        const std::string id = req.matches[1];
        if (!sessions.remove(id)) throw RequestError(404, "session_not_found", str("session '", id, "' does not exist"));
        res.set_content(dump(json{{"id", id}, {"object", "session"}, {"deleted", true}}), "application/json");
      });
    });
    guarded_post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, false); });
    guarded_post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, true); });
    if (options.ui) serve_chat_page();
  }

  // One complete request from the front. When the front has answered `Expect: 100-continue` itself, the
  // header goes before httplib sees it, or the client would get a second 100.
  // While draining, a connection closes after its response: its client reconnects, to another instance.
  bool serve(httplib::Stream& stream, bool close, bool continue_sent) {
    ++in_flight;
    struct Done {
      std::atomic<int64_t>& count;
      ~Done() { --count; }
    } done{in_flight};
    bool closed = false;
    const bool written = http.serve(stream, close, closed, [continue_sent](httplib::Request& req) {
      if (continue_sent) req.headers.erase("Expect");
    });
    return written && !closed && !close && !draining;
  }

  // The page's files hold no data and no secret, so they are served without the API key: the page then asks
  // for the key and sends it as a bearer token on every /v1 call, which keeps its rules.
  void serve_chat_page() {
    for (const StaticFile& file : chat_page_files())
      http.Get(literal_route(file.path), [&file](const httplib::Request&, httplib::Response& res) { send_page_file(file, res); });
  }

  // sinklm's extension of /v1/models: what makes this server's streams different.
  json model_card() const {
    const ModelConfig& model = decoder.config();
    const CacheOptions& cache = sessions.settings().cache;
    return {{"checkpoint", options.checkpoint},
            {"sink_mode", sink_mode_name(model.sink_mode)},
            {"sink_tokens", model.sink_count},
            {"cache", {{"policy", policy->name()}, {"window", policy->budget()}, {"sinks", policy->sinks()},
                       {"recent", policy->recent_capacity()}, {"positions", position_rule_name(cache.positions)},
                       {"kv_dtype", kv_dtype_name(cache.kv_dtype)}}},
            {"device", decoder.device().str()},
            {"max_tokens_limit", options.max_tokens_limit}};
  }

  template <typename Body>
  void guard(const httplib::Request& req, httplib::Response& res, Body body) {
    try {
      if (!api_key.accepts(req.get_header_value("Authorization")))
        throw RequestError(401, "invalid_api_key", "missing or wrong API key: send 'Authorization: Bearer <key>'");
      body();
    } catch (const RequestError& e) {
      res.status = e.status;
      res.set_content(dump(error_body(e.status, e.what(), e.code, e.param)), "application/json");
    } catch (const UserError& e) {
      res.status = 400;
      res.set_content(dump(error_body(400, e.what(), "invalid_request")), "application/json");
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(dump(error_body(500, str("internal error: ", e.what()), "internal_error")), "application/json");
    }
  }
  void guarded_get(const char* path, httplib::Server::Handler handler) {
    http.Get(path, [this, handler](const httplib::Request& req, httplib::Response& res) { guard(req, res, [&] { handler(req, res); }); });
  }
  void guarded_post(const char* path, httplib::Server::Handler handler) {
    http.Post(path, [this, handler](const httplib::Request& req, httplib::Response& res) { guard(req, res, [&] { handler(req, res); }); });
  }

  void complete(const httplib::Request& req, httplib::Response& res, bool chat) {
    const auto started = std::chrono::steady_clock::now();
    CompletionRequest request = parse_completion_request(
        req.body, chat, req.get_header_value("X-Session-Id"), {options.max_tokens_limit, next_id.load() * 7919});
    auto job = start_job(std::move(request));
    if (job->streaming) return stream_response(job, res, started);
    res.set_content(dump(whole_response(*job)), "application/json");
    metrics.request_seconds.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }

  // The ids of one prompt: the client's ids (checked against the vocabulary) or the tokenized text.
  std::vector<int64_t> prompt_ids(const PromptInput& p) const {
    const int64_t vocab = std::min(decoder.config().tokenizer_vocab_size, codec.vocab_size());
    if (!p.is_ids) return codec.encode(p.text);
    for (int64_t id : p.ids)
      if (id < 0 || id >= vocab)
        throw RequestError(400, "invalid_value", str("'prompt': token id ", id, " is outside the vocabulary [0, ", vocab, ")"), "prompt");
    return p.ids;
  }

  // A reported token's bytes. Every id in logprobs decodes: prompt ids are checked against the vocabulary
  // (prompt_ids), sinks come before the echoed part, and neither sampling nor the alternatives leave the
  // sampleable ids.
  std::string token_bytes(int64_t id) const { return codec.decode({id}); }

  // The names of an entry's alternatives, then of its token (token_names.h).
  std::vector<std::string> names_of(const TokenLogprob& e) const {
    std::vector<std::pair<int64_t, std::string>> tokens;
    for (const auto& [id, lp] : e.top) tokens.emplace_back(id, token_bytes(id));
    tokens.emplace_back(e.id, token_bytes(e.id));
    return position_names(tokens);
  }

  // Tokenizes the prompts, takes each choice's stream (the session's, or a new one) and hands the
  // generations to the worker. A session's new tokens go to its log before the worker sees them; the session
  // is handed back by finish_session once every choice has finished.
  std::shared_ptr<Job> start_job(CompletionRequest request) {
    std::vector<std::vector<int64_t>> prompts;
    for (const auto& p : request.prompts) {
      prompts.push_back(prompt_ids(p));
      if (static_cast<int64_t>(prompts.back().size()) > options.max_prompt_tokens)
        throw RequestError(400, "prompt_too_long", str("the prompt has ", prompts.back().size(), " tokens; the limit is ", options.max_prompt_tokens));
    }
    const int64_t choices = static_cast<int64_t>(prompts.size()) * request.n;
    if (choices > options.max_concurrent)
      throw RequestError(400, "invalid_value", str("'n' x prompts = ", choices, " choices; the server runs at most ", options.max_concurrent, " at once"), "n");
    if (worker.load() + choices > options.max_concurrent)
      throw RequestError(429, "too_many_streams", str("the server is generating for ", options.max_concurrent, " streams; retry shortly"));
    auto job = std::make_shared<Job>();
    job->chat = request.chat;
    job->streaming = request.stream;
    job->include_usage = request.include_usage;
    job->echo = request.echo;
    job->logprobs = request.logprobs;
    job->warnings = request.warnings;
    job->created = unix_time();
    job->id = str(request.chat ? "chatcmpl-" : "cmpl-", next_id++);
    for (const auto& w : job->warnings) std::fprintf(stderr, "sinklm serve: %s: warning: %s\n", job->id.c_str(), w.c_str());
    if (!request.session_id.empty()) job->session = sessions.acquire(request.session_id);
    const auto& model = decoder.config();
    try {
      for (size_t p = 0; p < prompts.size(); ++p)
        for (int64_t j = 0; j < request.n; ++j) {
          auto choice = std::make_unique<Choice>();
          choice->index = static_cast<int64_t>(p) * request.n + j;
          DecoderStream* stream;
          std::vector<int64_t> logged;  // new tokens of the session's stream: sinks, then the prompt
          GenerationRequest g = request.generation;
          g.sampling.seed += j;  // each choice its own sample, reproducible from the seed
          if (job->session) {
            stream = job->session->stream.get();
            if (job->session->log->size() == 0) logged = sink_prefix(model);  // a token-sink model sees its sinks first
            g.prompt = logged;
            g.prompt.insert(g.prompt.end(), job->session->unfed.begin(), job->session->unfed.end());
          } else {
            choice->own_stream = sessions.new_stream();
            stream = choice->own_stream.get();
            g.prompt = sink_prefix(model);
          }
          const int64_t echo_from = g.prompt.size();
          g.prompt.insert(g.prompt.end(), prompts[p].begin(), prompts[p].end());
          logged.insert(logged.end(), prompts[p].begin(), prompts[p].end());
          if (request.echo && request.logprobs >= 0) g.echo_from = echo_from;
          g.logprobs = request.logprobs;
          if (request.echo) choice->echo_text = request.prompts[p].is_ids ? codec.decode(prompts[p]) : request.prompts[p].text;
          choice->prompt_tokens = j == 0 ? static_cast<int64_t>(g.prompt.size()) : 0;
          std::weak_ptr<Job> weak = job;
          const size_t at = job->choices.size();
          choice->generation = std::make_shared<Generation>(std::move(g), *stream, codec, model,
                                                            [this, weak, at](const GenerationDelta& d) { on_delta(weak, at, d); });
          if (job->session) job->session->log->append(logged);
          job->choices.push_back(std::move(choice));
        }
    } catch (...) {
      if (job->session) sessions.release(job->session);
      throw;
    }
    job->unfinished = job->choices.size();
    for (const auto& c : job->choices) {
      metrics.prompt_tokens += c->prompt_tokens;
      worker.submit(c->generation);
    }
    return job;
  }

  // Once every choice has finished: the session's log is fsynced (and a snapshot written when due) before
  // the response that completes the request is sent; then the session is free for the next request.
  void finish_session(Job& job) {
    if (!job.session || job.session_handed_back.exchange(true)) return;
    try {
      sessions.finish_request(*job.session);
    } catch (...) {
      sessions.release(job.session);
      throw;
    }
    sessions.release(job.session);
  }

  // The completions API's logprobs object for `entries`; `offset`: text_offset of the first.
  json completion_logprobs(const std::vector<TokenLogprob>& entries, int64_t offset) const {
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
  json chat_logprobs(const std::vector<TokenLogprob>& entries) const {
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

  // Waits for every choice; the non-streaming response body.
  json whole_response(Job& job) {
    struct Result {
      std::string text, finish, error;
      GenerationFailure failure = GenerationFailure::None;
      int64_t completion_tokens = 0;
      std::vector<TokenLogprob> logprobs;
    };
    std::vector<Result> results(job.choices.size());
    {
      std::unique_lock<std::mutex> lock(job.mutex);
      job.changed.wait(lock, [&] { return job.done(); });
      for (const auto& [i, d] : job.deltas) {
        Result& r = results[i];
        r.text += d.text;
        r.completion_tokens = d.completion_tokens;
        if (!d.finish_reason.empty()) r.finish = d.finish_reason;
        if (!d.error.empty()) r.error = d.error;
        if (d.failure != GenerationFailure::None) r.failure = d.failure;
        r.logprobs.insert(r.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
      }
    }
    finish_session(job);
    json choices = json::array();
    std::vector<int64_t> completion_tokens;
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
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
                {"model", options.model_name}, {"choices", choices}, {"usage", usage_of(job, completion_tokens)}};
    out["stream"] = stream_info(job);
    if (!job.warnings.empty()) out["warnings"] = job.warnings;
    return out;
  }

  // On the worker thread. A session's sampled tokens reach its log before the delta can be sent.
  void on_delta(const std::weak_ptr<Job>& weak, size_t at, const GenerationDelta& d) {
    auto job = weak.lock();
    if (!job) return;
    Choice& choice = *job->choices[at];
    metrics.generated_tokens += d.completion_tokens - choice.tokens_counted;
    choice.tokens_counted = d.completion_tokens;
    if (job->session) job->session->log->append(d.tokens);
    if (!d.finish_reason.empty() && at == 0) {
      job->stream_length = choice.generation->stream().length();
      job->kv_entries = choice.generation->stream().entries();
    }
    if (!d.finish_reason.empty() && job->session)  // keep log = cache + unfed (an error may leave prompt unfed)
      job->session->unfed = d.finish_reason == "error" ? job->session->log->read_from(job->session->stream->length())
                                                       : choice.generation->unfed();
    {
      std::lock_guard<std::mutex> lock(job->mutex);
      job->deltas.emplace_back(at, d);
      if (!d.finish_reason.empty() && !choice.finished) {
        choice.finished = true;
        --job->unfinished;
      }
    }
    job->changed.notify_all();
  }

  // sinklm's extension of a response: the stream behind it (the first choice's), after this request, or
  // (a streamed chunk) after that chunk.
  static json stream_info(const Job& job, int64_t stream_length, int64_t kv_entries) {
    return {{"session", job.session ? json(job.session->id) : json()}, {"stream_length", stream_length},
            {"kv_entries", kv_entries}};
  }
  static json stream_info(const Job& job) { return stream_info(job, job.stream_length, job.kv_entries); }

  json chunk_json(const Job& job, const Choice& c, const GenerationDelta& d, bool first, int64_t text_offset) const {
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
    json out = {{"id", job.id}, {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", job.created}, {"model", options.model_name}, {"choices", json::array({choice})}};
    if (first && !job.warnings.empty()) out["warnings"] = job.warnings;
    if (!d.finish_reason.empty()) {
      out["usage"] = {{"prompt_tokens", c.prompt_tokens}, {"completion_tokens", d.completion_tokens},
                      {"total_tokens", c.prompt_tokens + d.completion_tokens}};
      out["stream"] = stream_info(job);
    } else {
      out["stream"] = stream_info(job, d.stream_length, d.kv_entries);
    }
    return out;
  }

  // What a streamed response has sent of each choice.
  struct StreamProgress {
    std::vector<bool> started;
    std::vector<int64_t> text_offset, completion_tokens;
  };

  // One server-sent event: choice `i`'s delta `d` as a chunk.
  std::string chunk_event(const Job& job, size_t i, const GenerationDelta& d, StreamProgress& progress) const {
    const bool first = !progress.started[i];
    std::string event = "data: " + dump(chunk_json(job, *job.choices[i], d, first, progress.text_offset[i])) + "\n\n";
    progress.started[i] = true;
    for (const auto& e : d.logprobs) progress.text_offset[i] += token_bytes(e.id).size();
    progress.completion_tokens[i] = d.completion_tokens;
    return event;
  }

  // Server-sent events. Before each write the session's log is fsynced, so every token a client has received
  // survives a crash; the last write (finish chunks, usage, [DONE]) follows finish_session.
  void stream_response(const std::shared_ptr<Job>& job, httplib::Response& res,
                       std::chrono::steady_clock::time_point started) {
    res.set_header("Cache-Control", "no-cache");
    auto progress = std::make_shared<StreamProgress>();
    progress->started.assign(job->choices.size(), false);
    progress->text_offset.assign(job->choices.size(), 0);
    progress->completion_tokens.assign(job->choices.size(), 0);
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, progress, started](size_t, httplib::DataSink& sink) {
          std::deque<std::pair<size_t, GenerationDelta>> deltas;
          bool done;
          {
            std::unique_lock<std::mutex> lock(job->mutex);
            job->changed.wait(lock, [&] { return job->done() || !job->deltas.empty(); });
            deltas.swap(job->deltas);
            done = job->done();
          }
          std::string events;
          for (auto& [i, d] : deltas) {
            if (d.finish_reason == "error") {  // its tokens first (generated and logged), then why it ended
              const RequestError e = failure_error(d.failure, d.error);
              d.finish_reason.clear();
              if (!d.text.empty() || !d.logprobs.empty()) events += chunk_event(*job, i, d, *progress);
              events += "data: " + dump(error_body(e.status, e.what(), e.code)) + "\n\n";
              continue;
            }
            events += chunk_event(*job, i, d, *progress);
          }
          if (done) {
            try {
              finish_session(*job);
            } catch (const std::exception& e) {  // the log could not be made durable (disk full, I/O error)
              events += "data: " + dump(error_body(500, e.what(), "session_not_durable")) + "\n\n";
            }
            if (job->include_usage)
              events += "data: " + dump(json{{"id", job->id}, {"object", job->chat ? "chat.completion.chunk" : "text_completion"},
                                             {"created", job->created}, {"model", options.model_name},
                                             {"choices", json::array()}, {"usage", usage_of(*job, progress->completion_tokens)}}) + "\n\n";
            events += "data: [DONE]\n\n";
          } else if (job->session && !events.empty()) {
            job->session->log->sync();
          }
          if (!events.empty() && !sink.write(events.data(), events.size())) {
            for (const auto& c : job->choices) c->generation->request_cancel();  // the client went away
            return false;
          }
          if (done) {
            metrics.request_seconds.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
            sink.done();
          }
          return true;
        },
        [this, job](bool) {  // also when the client went away: the session comes back once its choices end
          for (const auto& c : job->choices) c->generation->request_cancel();  // no-op on finished ones
          {
            std::unique_lock<std::mutex> lock(job->mutex);
            job->changed.wait(lock, [&] { return job->done(); });
          }
          try {
            finish_session(*job);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "sinklm serve: %s: %s\n", job->id.c_str(), e.what());
          }
        });
  }
};

OpenAiServer::OpenAiServer(ServerOptions options, CachedDecoder& decoder, const TextCodec& codec, SessionStore& sessions)
    : impl_(std::make_unique<Impl>(std::move(options), decoder, codec, sessions)) {}

OpenAiServer::~OpenAiServer() = default;

int OpenAiServer::bind() {
  const int port = impl_->front.bind(impl_->options.host, impl_->options.port);
  impl_->http.set_serving(impl_->front.listen_fd());
  return port;
}

void OpenAiServer::run() { impl_->front.run(); }

void OpenAiServer::begin_drain() { impl_->draining = true; }

int64_t OpenAiServer::requests_in_flight() const { return impl_->in_flight; }

void OpenAiServer::stop() {
  // Generation ends at the step it is in and each response sends what it holds, so a stream is cut on a token
  // its session logged and its client received; a client that stops reading gets kStopFlushSeconds.
  impl_->worker.stop_generating();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kStopFlushSeconds);
  while (impl_->in_flight > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->http.set_serving(INVALID_SOCKET);  // streamed responses still running end; then the front stops
  impl_->front.stop();
}

}  // namespace sinklm
