// sinklm serve: the OpenAI-compatible streaming server (serve/openai_server.h) on a checkpoint.
#include <torch/torch.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "core/config/args.h"
#include "core/error.h"
#include "model/io/checkpoint.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "serve/openai_server.h"

namespace sinklm {

namespace {

// Every flag of `serve`, bound to the options it sets.
struct ServeFlags {
  ModelFlags model;
  CacheFlags cache;
  ServerOptions server;
  std::string model_name;  // "": the checkpoint's directory name
  bool no_ui = false;      // every default of serve's own is in ServerOptions (serve/openai_server.h)
};

std::vector<FlagSpec> serve_flags(ServeFlags& f) {
  ServerOptions& o = f.server;
  ConnectionLimits& c = o.connections;
  constexpr Range kSeconds{1e-3, 86400}, kCount{1, 1e12};
  return with_flags(
      {flag(&o.host, "host", "ADDR", "address to listen on"),
       flag(&o.port, "port", "N", "port (0 = any free port, printed on stdout)", Range{0, 65535}),
       flag(&f.model_name, "model-name", "NAME", "the model id in responses and /v1/models (default: the directory name)"),
       flag(&o.api_key, "api-key", "KEY", "require 'Authorization: Bearer KEY' on /v1/* (default: $SINKLM_API_KEY, else none)"),
       flag(&o.session_dir, "session-dir", "DIR", "where sessions live: token logs and KV snapshots"),
       flag(&o.durability.snapshot_every, "snapshot-every", "N", "tokens streamed in a session between KV snapshots", kCount),
       flag(&o.sessions_in_memory, "sessions-in-memory", "N", "loaded sessions before the least recently used idle one goes to disk", kCount),
       flag(&o.max_sessions, "max-sessions", "N", "sessions in total, memory and disk", kCount),
       flag(&c.frame.max_body_bytes, "max-body-bytes", "N", "largest request body", kCount),
       flag(&o.max_prompt_tokens, "max-prompt-tokens", "N", "longest prompt of one request", kCount),
       flag(&o.max_tokens_limit, "max-tokens-limit", "N", "largest max_tokens a request may ask for", kCount),
       flag(&o.max_concurrent, "max-concurrent", "N", "generations queued or running at once", kCount),
       flag(&o.prefill_chunk, "prefill-chunk", "N", "prompt tokens per stream per step", kCount),
       flag(&c.max_connections, "max-connections", "N", "open client connections in total; beyond: 503 with Retry-After", kCount),
       flag(&c.max_per_client, "max-connections-per-client", "N", "open connections from one client address", kCount),
       flag(&c.header_timeout_s, "header-timeout", "S", "seconds from a request's first byte to the end of its headers, else 408", kSeconds),
       flag(&c.body_timeout_s, "body-timeout", "S", "seconds from the end of the headers to the end of the body, else 408", kSeconds),
       flag(&c.idle_timeout_s, "idle-timeout", "S", "seconds a connection may stay open between requests", kSeconds),
       flag(&c.http_workers, "http-workers", "N", "threads serving complete requests, each streamed response to its end", Range{1, 4096}),
       flag(&c.queue_timeout_s, "queue-timeout", "S", "seconds a complete request may wait for a free worker, else 503", kSeconds),
       flag(&o.drain_seconds, "drain-seconds", "S", "on SIGTERM, how long running requests may take to finish (0 = stop)", Range{0, 86400}),
       flag(&f.no_ui, "no-ui", "do not serve the chat page at GET / (the API is unchanged)")},
      {model_flags(f.model), cache_flags(f.cache)});
}

// SIGTERM (an orchestrator's stop): new requests get 503 and /health says "draining" while the running ones
// finish, for up to `seconds`; a second SIGTERM or a SIGINT ends the wait. Then the caller stops the server.
void drain(OpenAiServer& server, const sigset_t& stop_signals, double seconds) {
  server.begin_drain();
  std::fprintf(stderr, "sinklm serve: SIGTERM: draining %lld requests (up to %g s; again to stop now)\n",
               static_cast<long long>(server.requests_in_flight()), seconds);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const timespec tick{0, 50 * 1000 * 1000};
  while (server.requests_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    if (sigtimedwait(&stop_signals, nullptr, &tick) >= 0) return;  // asked again: stop now
    if (errno != EAGAIN && errno != EINTR) {
      std::fprintf(stderr, "sinklm serve: sigtimedwait: %s; stopping\n", std::strerror(errno));
      return;
    }
  }
  if (server.requests_in_flight() > 0)
    std::fprintf(stderr, "sinklm serve: drain time up; stopping %lld requests\n",
                 static_cast<long long>(server.requests_in_flight()));
}

}  // namespace

int run_serve_command(const std::vector<std::string>& argv) {
  ServeFlags f;  // flags are checked here, before the model takes its time to load
  Args args("serve", "--checkpoint DIR [--port 8000] [--cache sink_window --window W --sinks S] [--api-key KEY]",
            serve_flags(f), argv);
  if (args.print_help_if_requested()) return 0;
  // SIGINT/SIGTERM are taken by sigwait below. They are blocked before the model loads: threads inherit the
  // mask, and a thread started unmasked (LibTorch's intra-op pool) would take a SIGTERM and die of it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  InferenceModel m = open_inference_model(f.model);
  const std::string& checkpoint = m.checkpoint;
  const torch::Device device = m.device;
  CachedDecoder decoder(m.loaded.model);
  const auto& model = decoder.config();
  const auto& codec = m.codec;

  StreamSettings settings;
  settings.cache = cache_options(f.cache, m);
  auto policy = make_cache_policy(settings.cache, model, "--cache/--window/--sinks");  // validates now
  ServerOptions& options = f.server;
  SessionStore sessions(options.session_dir, options.sessions_in_memory, options.max_sessions, settings, model, device,
                        options.durability);

  std::string name = std::filesystem::path(checkpoint).filename().string();
  if (name.empty()) name = std::filesystem::path(checkpoint).parent_path().filename().string();
  options.model_name = !f.model_name.empty() ? f.model_name : name.empty() ? "sinklm" : name;
  options.checkpoint = name.empty() ? "sinklm" : name;
  options.ui = !f.no_ui;
  const char* env_key = std::getenv("SINKLM_API_KEY");
  if (!args.has("api-key") && env_key) options.api_key = env_key;

  // SIGINT stops the server at once; SIGTERM drains it first (drain_then_stop). Either way loaded sessions are
  // then snapshotted so a restart replays little. (Sessions survive a SIGKILL too: every token is in their
  // fsynced logs; see serve/sessions/session_store.h.)
  {  // the server (and its generation worker) ends before sessions are saved: no stream is mid-step then
    OpenAiServer server(options, decoder, *codec, sessions);
    const int port = server.bind();
    std::printf("sinklm serve: listening on http://%s:%d (model %s, %s %s cache, positions %s, tokenizer: %s)\n",
                options.host.c_str(), port, options.model_name.c_str(), policy->name().c_str(), policy->label().c_str(),
                position_rule_name(settings.cache.positions), codec->description().c_str());
    std::fflush(stdout);
    if (options.ui)
      std::fprintf(stderr, "sinklm serve: chat page at http://%s:%d/ (--no-ui turns it off)\n", options.host.c_str(), port);
    std::thread stopper([&] {
      int signal = 0;
      sigwait(&stop_signals, &signal);
      if (signal == SIGTERM) drain(server, stop_signals, options.drain_seconds);
      server.stop();
    });
    server.run();
    pthread_kill(stopper.native_handle(), SIGTERM);  // no-op when the stopper already returned
    stopper.join();
  }
  sessions.save_all();
  std::fprintf(stderr, "sinklm serve: stopped; %lld sessions saved in %s\n",
               static_cast<long long>(sessions.in_memory() + sessions.on_disk()), options.session_dir.c_str());
  return 0;
}

}  // namespace sinklm
