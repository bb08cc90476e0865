#include "serve/openai_server.h"

#include <httplib.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "serve/http/api_key.h"
#include "serve/chat_page/chat_page.h"
#include "serve/api/completion_job.h"
#include "serve/api/completion_response.h"
#include "serve/api/tokenize.h"
#include "serve/http/connection_front.h"
#include "serve/generation_worker.h"
#include "serve/server_metrics.h"

namespace sinklm {
namespace {

// How long stop() waits for responses to send the tokens generated before it (a client reading them takes
// milliseconds; one that stopped reading is cut when this runs out).
constexpr double kStopFlushSeconds = 2;

// The metrics label of a path: known routes, else "other" (unknown paths must not create new series).
// A response's warnings (fields ignored) as one header value: OpenAI's objects carry no such key.
std::string join_warnings(const std::vector<std::string>& warnings) {
  std::string out;
  for (const auto& w : warnings) out += (out.empty() ? "" : "; ") + w;
  for (char& c : out)
    if (c == '\r' || c == '\n') c = ' ';  // a field name could hold them; a header value must not
  return out;
}

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

// httplib's Server with its request processing opened up: the connection front (serve/http/connection_front.h)
// accepts and reads requests, and runs each complete one through the routes here.
class FrontedHttpServer : public httplib::Server {
 public:
  bool serve(httplib::Stream& stream, bool close, bool& closed, const std::function<void(httplib::Request&)>& setup) {
    return process_request(stream, close, closed, setup);
  }
  // httplib ends streamed responses once its listening socket is invalid: that is how stop() reaches them.
  void set_serving(socket_t listening) { svr_sock_ = listening; }
};

}  // namespace

struct OpenAiServer::Impl {
  ServerOptions options;
  const ApiKey api_key;
  CachedDecoder& decoder;
  const TextCodec& codec;
  SessionStore& sessions;
  ServerMetrics metrics;
  GenerationWorker worker;
  JobRunner jobs;
  const CompletionResponse render;
  FrontedHttpServer http;
  ConnectionFront front;
  std::atomic<bool> draining{false};     // SIGTERM: new requests get 503, running ones finish
  std::atomic<int64_t> in_flight{0};     // requests a worker is serving, streamed responses to their end
  const std::unique_ptr<KvCachePolicy> policy;  // every session's (the model card, K/V entries of a session)

  Impl(ServerOptions o, CachedDecoder& d, const TextCodec& c, SessionStore& s)
      : options(std::move(o)), api_key(options.api_key), decoder(d), codec(c), sessions(s),
        worker(d, options.prefill_chunk, metrics),
        jobs(options, d, c, s, worker, metrics),
        render(c, options.model_name),
        front(options.connections, [this](httplib::Stream& s, bool close, bool continue_sent) { return serve(s, close, continue_sent); },
              [](int status, const std::string& code, const std::string& message) { return dump(error_body(status, message, code)); },
              [this](int status) { metrics.count_response("connection", status); }),
        policy(make_cache_policy(s.settings().cache, d.config())) {
    http.set_payload_max_length(options.connections.frame.max_body_bytes);
    http.set_keep_alive_timeout(static_cast<time_t>(std::lround(options.connections.idle_timeout_s)));
    http.set_keep_alive_max_count(options.connections.max_requests_per_connection);
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (res.body.empty()) {
        const std::string message = res.status == 413 ? str("the request body exceeds ", options.connections.frame.max_body_bytes, " bytes")
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
                    {"max_model_len", max_model_len()}, {"sinklm", model_card()}};
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
    guarded_post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {  // llama.cpp's routes
      res.set_content(dump(tokenize_response(req.body, codec, decoder.config())), "application/json");
    });
    guarded_post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
      res.set_content(dump(detokenize_response(req.body, codec, decoder.config())), "application/json");
    });
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

  // The longest request, prompt tokens plus the one generated, in which every prompt token is scored with all
  // the tokens before it in the cache: vLLM's key, what lm-eval's max_length takes (it sends max_length - 1
  // tokens). A cache of W entries, P of them the model's sink tokens (mode token), holds W - P prompt tokens: an
  // cache that slides (an evicting one, or recompute's re-encoded window) scores W - P + 1 of them with every
  // earlier one in view (the last is scored, never held); the full cache must hold every token it is given.
  int64_t max_model_len() const {
    const bool slides = policy->fills_budget() || policy->recomputes();
    return policy->budget() - sink_prefix_length(decoder.config()) + (slides ? 2 : 1);
  }

  // sinklm's extension of /v1/models: what makes this server's streams different.
  json model_card() const {
    const ModelConfig& model = decoder.config();
    const CacheOptions& cache = sessions.settings().cache;
    return {{"checkpoint", options.checkpoint},
            {"sink_mode", sink_mode_name(model.sink_mode)},
            {"sink_tokens", model.sink_count},
            {"tokenizer", codec.description()},
            {"cache", {{"policy", policy->name()}, {"window", policy->budget()}, {"sinks", policy->sinks()},
                       {"recent", policy->recent_capacity()}, {"positions", position_rule_name(cache.positions)},
                       {"kv_dtype", kv_format_name(cache.kv_format)}}},
            {"device", decoder.device().str()},
            {"max_tokens_limit", options.max_tokens_limit}};
  }

  template <typename Body>
  void guard(const httplib::Request& req, httplib::Response& res, Body body) {
    try {
      if (!api_key.accepts(req.get_header_value("Authorization")))
        throw RequestError(401, "invalid_api_key", "missing or wrong API key: send 'Authorization: Bearer <key>'");
      body();
    } catch (const StorageError& e) {
      reply_error(res, storage_failure(e));
    } catch (const RequestError& e) {
      reply_error(res, e);
    } catch (const UserError& e) {
      res.status = 400;
      res.set_content(dump(error_body(400, e.what(), "invalid_request")), "application/json");
    } catch (const std::exception& e) {
      res.status = 500;
      res.set_content(dump(error_body(500, str("internal error: ", e.what()), "internal_error")), "application/json");
    }
  }
  void reply_error(httplib::Response& res, const RequestError& e) {
    res.status = e.status;
    if (e.status == 429 || e.status == 503) res.set_header("Retry-After", std::to_string(options.connections.retry_after_s));
    res.set_content(dump(error_body(e.status, e.what(), e.code, e.param)), "application/json");
  }

  // The path and errno go to the log and a counter; the client learns only what it can act on.
  RequestError storage_failure(const StorageError& e) {
    std::fprintf(stderr, "sinklm serve: storage: %s\n", e.what());
    ++metrics.storage_errors;
    return storage_error(e.full());
  }

  void guarded_get(const char* path, httplib::Server::Handler handler) {
    http.Get(path, [this, handler](const httplib::Request& req, httplib::Response& res) { guard(req, res, [&] { handler(req, res); }); });
  }
  void guarded_post(const char* path, httplib::Server::Handler handler) {
    http.Post(path, [this, handler](const httplib::Request& req, httplib::Response& res) { guard(req, res, [&] { handler(req, res); }); });
  }

  void complete(const httplib::Request& req, httplib::Response& res, bool chat) {
    const auto started = std::chrono::steady_clock::now();
    auto job = jobs.start(req.body, chat, req.get_header_value("X-Session-Id"));
    res.set_header("X-Sinklm-Seed", std::to_string(static_cast<int64_t>(job->seed)));  // replaying it with `seed` repeats the sample
    if (!job->warnings.empty()) res.set_header("X-Sinklm-Warnings", join_warnings(job->warnings));
    if (job->streaming) return stream_response(job, res, started);
    res.set_content(dump(render.whole(*job, jobs.wait_for_results(*job))), "application/json");
    metrics.request_seconds.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }

  // Server-sent events. Before each write the session's log is fsynced, so every token a client has received
  // survives a crash; the last write (finish chunks, usage, [DONE]) follows finish_session.
  void stream_response(const std::shared_ptr<Job>& job, httplib::Response& res,
                       std::chrono::steady_clock::time_point started) {
    res.set_header("Cache-Control", "no-cache");
    auto progress = std::make_shared<StreamProgress>(job->choices.size());
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
              if (!d.text.empty() || !d.logprobs.empty()) events += render.chunk_event(*job, i, d, *progress);
              events += "data: " + dump(error_body(e.status, e.what(), e.code)) + "\n\n";
              continue;
            }
            events += render.chunk_event(*job, i, d, *progress);
          }
          if (done) {
            try {
              jobs.finish_session(*job);
            } catch (const StorageError& e) {  // the log could not be made durable (disk full, I/O error)
              const RequestError answer = storage_failure(e);
              events += "data: " + dump(error_body(answer.status, answer.what(), answer.code)) + "\n\n";
            } catch (const std::exception& e) {
              events += "data: " + dump(error_body(500, e.what(), "session_not_durable")) + "\n\n";
            }
            if (job->include_usage) events += render.usage_event(*job, *progress);
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
            jobs.finish_session(*job);
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
