#include "serve/openai_server.h"

#include <httplib.h>
#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <nlohmann/json.hpp>

#include "serve/completion_request.h"
#include "serve/generation_worker.h"
#include "serve/request_error.h"
#include "serve/server_metrics.h"

namespace sinklm {
namespace {

using json = nlohmann::json;

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
  return path.rfind("/v1/sessions/", 0) == 0 ? "/v1/sessions/{id}" : "other";
}

// One request's generation: its stream (a session's or its own), the deltas the worker produced.
struct Job {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<GenerationDelta> deltas;
  bool done = false;
  std::shared_ptr<Session> session;
  std::unique_ptr<DecoderStream> own_stream;
  std::shared_ptr<Generation> generation;
  std::string id;
  int64_t created = 0;
  bool chat = false, streaming = false;
  int64_t prompt_tokens = 0;
  int64_t tokens_counted = 0;  // completion tokens already added to the metrics (worker thread only)
  int64_t stream_length = 0, kv_entries = 0;  // the stream when the generation finished
};

}  // namespace

struct OpenAiServer::Impl {
  ServerOptions options;
  CachedDecoder& decoder;
  const TextCodec& codec;
  SessionStore& sessions;
  ServerMetrics metrics;
  GenerationWorker worker;
  httplib::Server http;
  std::atomic<uint64_t> next_id{1};

  Impl(ServerOptions o, CachedDecoder& d, const TextCodec& c, SessionStore& s)
      : options(std::move(o)), decoder(d), codec(c), sessions(s), worker(d, options.prefill_chunk, metrics) {
    http.new_task_queue = [threads = options.http_threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(options.max_body_bytes);
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
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(sessions.in_memory(), sessions.on_disk(), sessions.idle_kv_entries()),
                      "text/plain; version=0.0.4");
    });
    guarded_get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json model = {{"id", options.model_name}, {"object", "model"}, {"created", unix_time()}, {"owned_by", "sinklm"}};
      res.set_content(dump(json{{"object", "list"}, {"data", json::array({model})}}), "application/json");
    });
    guarded_post("/v1/sessions", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump(json{{"id", sessions.create()}, {"object", "session"}}), "application/json");
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
  }

  template <typename Body>
  void guard(const httplib::Request& req, httplib::Response& res, Body body) {
    try {
      if (!options.api_key.empty() && req.get_header_value("Authorization") != "Bearer " + options.api_key)
        throw RequestError(401, "invalid_api_key", "missing or wrong API key: send 'Authorization: Bearer <key>'");
      body();
    } catch (const RequestError& e) {
      res.status = e.status;
      res.set_content(dump(error_body(e.status, e.what(), e.code)), "application/json");
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

  // Tokenizes the prompt, takes the request's stream (its session's, or a new one) and hands the generation
  // to the worker. The session is handed back when the generation ends (on_delta) or here on failure.
  std::shared_ptr<Job> start_job(CompletionRequest request) {
    auto text_ids = codec.encode(request.prompt_text);
    if (static_cast<int64_t>(text_ids.size()) > options.max_prompt_tokens)
      throw RequestError(400, "prompt_too_long", str("the prompt has ", text_ids.size(), " tokens; the limit is ", options.max_prompt_tokens));
    if (worker.load() >= options.max_concurrent)
      throw RequestError(429, "too_many_streams", str("the server is generating for ", options.max_concurrent, " streams; retry shortly"));
    auto job = std::make_shared<Job>();
    job->chat = request.chat;
    job->streaming = request.stream;
    job->created = unix_time();
    job->id = str(request.chat ? "chatcmpl-" : "cmpl-", next_id++);
    DecoderStream* stream;
    if (!request.session_id.empty()) {
      job->session = sessions.acquire(request.session_id);
      stream = job->session->stream.get();
    } else {
      job->own_stream = sessions.new_stream();
      stream = job->own_stream.get();
    }
    const auto& model = decoder.config();
    auto& prompt = request.generation.prompt;
    if (stream->length() == 0) prompt = sink_prefix(model);  // a token-sink model sees its sinks first
    if (job->session) prompt.insert(prompt.end(), job->session->unfed.begin(), job->session->unfed.end());
    prompt.insert(prompt.end(), text_ids.begin(), text_ids.end());
    job->prompt_tokens = prompt.size();
    try {
      std::weak_ptr<Job> weak = job;
      job->generation = std::make_shared<Generation>(std::move(request.generation), *stream, codec, model,
                                                     [this, weak](const GenerationDelta& d) { on_delta(weak, d); });
    } catch (...) {
      if (job->session) sessions.release(job->session);
      throw;
    }
    metrics.prompt_tokens += job->prompt_tokens;
    worker.submit(job->generation);
    return job;
  }

  // Waits for the whole generation; the non-streaming response body.
  json whole_response(Job& job) {
    std::string text, finish, error;
    int64_t completion_tokens = 0;
    {
      std::unique_lock<std::mutex> lock(job.mutex);
      job.changed.wait(lock, [&] { return job.done; });
      for (const auto& d : job.deltas) {
        text += d.text;
        completion_tokens = d.completion_tokens;
        if (!d.finish_reason.empty()) finish = d.finish_reason;
        if (!d.error.empty()) error = d.error;
      }
    }
    if (finish == "error") throw RequestError(400, "context_length_exceeded", error);
    json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (job.chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
    else choice["text"] = text;
    json out = {{"id", job.id}, {"object", job.chat ? "chat.completion" : "text_completion"}, {"created", job.created},
                {"model", options.model_name}, {"choices", json::array({choice})},
                {"usage", {{"prompt_tokens", job.prompt_tokens}, {"completion_tokens", completion_tokens},
                           {"total_tokens", job.prompt_tokens + completion_tokens}}}};
    out["stream"] = stream_info(job);
    return out;
  }

  // On the worker thread. The final delta also hands the session back.
  void on_delta(const std::weak_ptr<Job>& weak, const GenerationDelta& d) {
    auto job = weak.lock();
    if (!job) return;
    metrics.generated_tokens += d.completion_tokens - job->tokens_counted;
    job->tokens_counted = d.completion_tokens;
    if (!d.finish_reason.empty()) {
      job->stream_length = job->generation->stream().length();
      job->kv_entries = job->generation->stream().entries();
    }
    if (!d.finish_reason.empty() && job->session) {
      job->session->unfed = job->generation->unfed();
      sessions.release(job->session);
    }
    {
      std::lock_guard<std::mutex> lock(job->mutex);
      job->deltas.push_back(d);
      if (!d.finish_reason.empty()) job->done = true;
    }
    job->changed.notify_all();
  }

  // sinklm's extension of a response: the stream behind it, after this request.
  static json stream_info(const Job& job) {
    return {{"session", job.session ? json(job.session->id) : json()}, {"stream_length", job.stream_length},
            {"kv_entries", job.kv_entries}};
  }

  json chunk_json(const Job& job, const GenerationDelta& d, bool first) const {
    json choice = {{"index", 0}, {"finish_reason", d.finish_reason.empty() ? json() : json(d.finish_reason)}};
    if (job.chat) {
      json delta = json::object();
      if (first) delta["role"] = "assistant";
      if (!d.text.empty()) delta["content"] = d.text;
      choice["delta"] = delta;
    } else {
      choice["text"] = d.text;
      choice["logprobs"] = nullptr;
    }
    json out = {{"id", job.id}, {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", job.created}, {"model", options.model_name}, {"choices", json::array({choice})}};
    if (!d.finish_reason.empty()) {
      out["usage"] = {{"prompt_tokens", job.prompt_tokens}, {"completion_tokens", d.completion_tokens},
                      {"total_tokens", job.prompt_tokens + d.completion_tokens}};
      out["stream"] = stream_info(job);
    }
    return out;
  }

  void stream_response(const std::shared_ptr<Job>& job, httplib::Response& res,
                       std::chrono::steady_clock::time_point started) {
    res.set_header("Cache-Control", "no-cache");
    auto first = std::make_shared<bool>(true);
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, first, started](size_t, httplib::DataSink& sink) {
          std::deque<GenerationDelta> deltas;
          bool done;
          {
            std::unique_lock<std::mutex> lock(job->mutex);
            job->changed.wait(lock, [&] { return job->done || !job->deltas.empty(); });
            deltas.swap(job->deltas);
            done = job->done;
          }
          std::string events;
          for (const auto& d : deltas) {
            if (d.finish_reason == "error") {
              events += "data: " + dump(error_body(400, d.error, "context_length_exceeded")) + "\n\n";
              continue;
            }
            events += "data: " + dump(chunk_json(*job, d, *first)) + "\n\n";
            *first = false;
          }
          if (done) events += "data: [DONE]\n\n";
          if (!events.empty() && !sink.write(events.data(), events.size())) {
            job->generation->request_cancel();  // the client went away
            return false;
          }
          if (done) {
            metrics.request_seconds.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
            sink.done();
          }
          return true;
        },
        [job](bool) {
          if (!job->done) job->generation->request_cancel();
        });
  }
};

OpenAiServer::OpenAiServer(ServerOptions options, CachedDecoder& decoder, const TextCodec& codec, SessionStore& sessions)
    : impl_(std::make_unique<Impl>(std::move(options), decoder, codec, sessions)) {}

OpenAiServer::~OpenAiServer() = default;

int OpenAiServer::bind() {
  auto& o = impl_->options;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) fail("--host ", o.host, " --port ", o.port, ": cannot listen there (in use, or not a local address)");
  return port;
}

void OpenAiServer::run() { impl_->http.listen_after_bind(); }

void OpenAiServer::stop() { impl_->http.stop(); }

}  // namespace sinklm
