// sinklm serve: the OpenAI-compatible streaming server (server/openai_server.h) on a checkpoint.
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

#include "core/args.h"
#include "core/error.h"
#include "model/checkpoint.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "server/openai_server.h"

namespace sinklm {

namespace {

// The client connection limits of server/connection_front.h from their flags.
ConnectionLimits connection_limits(const Args& args) {
  ConnectionLimits c;
  c.max_connections = args.get_int("max-connections", c.max_connections);
  c.max_per_client = args.get_int("max-connections-per-client", c.max_per_client);
  c.header_timeout_s = args.get_double("header-timeout", c.header_timeout_s);
  c.body_timeout_s = args.get_double("body-timeout", c.body_timeout_s);
  c.idle_timeout_s = args.get_double("idle-timeout", c.idle_timeout_s);
  c.queue_timeout_s = args.get_double("queue-timeout", c.queue_timeout_s);
  if (c.max_connections < 1 || c.max_per_client < 1)
    fail("--max-connections and --max-connections-per-client must be at least 1");
  for (double s : {c.header_timeout_s, c.body_timeout_s, c.idle_timeout_s, c.queue_timeout_s})
    if (!(s > 0 && s <= 86400))
      fail("--header-timeout, --body-timeout, --idle-timeout and --queue-timeout must be seconds in (0, 86400]");
  return c;
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
  Args args("serve", "--checkpoint DIR [--port 8000] [--cache sink_window --window W --sinks S] [--api-key KEY]",
            with_flags({{"host", "ADDR", "address to listen on (default 127.0.0.1)"},
             {"port", "N", "port (default 8000; 0 = any free port, printed on stdout)"},
             {"model-name", "NAME", "the model id in responses and /v1/models (default: the directory name)"},
             {"api-key", "KEY", "require 'Authorization: Bearer KEY' on /v1/* (default: $SINKLM_API_KEY, else none)"},
             {"session-dir", "DIR", "where sessions live: token logs and KV snapshots (default: ./sinklm-sessions)"},
             {"snapshot-every", "N", "tokens streamed in a session between KV snapshots (default 1024)"},
             {"sessions-in-memory", "N", "loaded sessions before the least recently used idle one goes to disk (64)"},
             {"max-sessions", "N", "sessions in total, memory and disk (default 10000)"},
             {"max-body-bytes", "N", "largest request body (default 1048576)"},
             {"max-prompt-tokens", "N", "longest prompt of one request (default 16384)"},
             {"max-tokens-limit", "N", "largest max_tokens a request may ask for (default 4096)"},
             {"max-concurrent", "N", "generations queued or running at once (default 64)"},
             {"prefill-chunk", "N", "prompt tokens per stream per step (default 256)"},
             {"max-connections", "N", "open client connections in total; beyond: 503 with Retry-After (default 512)"},
             {"max-connections-per-client", "N", "open connections from one client address (default 64)"},
             {"header-timeout", "S", "seconds from a request's first byte to the end of its headers, else 408 (10)"},
             {"body-timeout", "S", "seconds from the end of the headers to the end of the body, else 408 (30)"},
             {"idle-timeout", "S", "seconds a connection may stay open between requests (default 15)"},
             {"http-workers", "N", "threads serving complete requests, each streamed response to its end (default 64)"},
             {"queue-timeout", "S", "seconds a complete request may wait for a free worker, else 503 (default 30)"},
             {"drain-seconds", "S", "on SIGTERM, how long running requests may take to finish (default 30; 0 = stop)"},
             {"no-ui", "", "do not serve the chat page at GET / (the API is unchanged)"}},
                       {model_flags(), cache_flags()}),
            argv);
  if (args.print_help_if_requested()) return 0;
  // SIGINT/SIGTERM are taken by sigwait below. They are blocked before the model loads: threads inherit the
  // mask, and a thread started unmasked (LibTorch's intra-op pool) would take a SIGTERM and die of it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const double drain_seconds = args.get_double("drain-seconds", 30);
  if (!(drain_seconds >= 0 && drain_seconds <= 86400)) fail("--drain-seconds must be seconds in [0, 86400]");
  const ConnectionLimits connections = connection_limits(args);  // checked before the model takes its time to load
  const int64_t http_workers = args.get_int("http-workers", 64);
  if (http_workers < 1 || http_workers > 4096) fail("--http-workers must be in [1, 4096]");
  InferenceModel m = open_inference_model(args);
  const std::string& checkpoint = m.checkpoint;
  const torch::Device device = m.device;
  CachedDecoder decoder(m.loaded.model);
  const auto& model = decoder.config();
  const auto& codec = m.codec;

  StreamSettings settings;
  settings.cache = cache_options(args);
  auto policy = make_cache_policy(settings.cache, model, "--cache/--window/--sinks");  // validates now
  SessionDurability durability;
  durability.snapshot_every = args.get_int("snapshot-every", 1024);
  SessionStore sessions(args.get("session-dir", "sinklm-sessions"), args.get_int("sessions-in-memory", 64),
                        args.get_int("max-sessions", 10000), settings, model, device, durability);

  ServerOptions options;
  options.host = args.get("host", "127.0.0.1");
  options.port = static_cast<int>(args.get_int("port", 8000));
  std::string name = std::filesystem::path(checkpoint).filename().string();
  if (name.empty()) name = std::filesystem::path(checkpoint).parent_path().filename().string();
  options.model_name = args.get("model-name", name.empty() ? "sinklm" : name);
  options.checkpoint = name.empty() ? "sinklm" : name;
  options.ui = !args.has("no-ui");
  const char* env_key = std::getenv("SINKLM_API_KEY");
  options.api_key = args.get("api-key", env_key ? env_key : "");
  options.max_body_bytes = args.get_int("max-body-bytes", 1 << 20);
  options.max_prompt_tokens = args.get_int("max-prompt-tokens", 16384);
  options.max_tokens_limit = args.get_int("max-tokens-limit", 4096);
  options.max_concurrent = args.get_int("max-concurrent", 64);
  options.prefill_chunk = args.get_int("prefill-chunk", 256);
  if (options.prefill_chunk < 1 || options.max_concurrent < 1 || options.max_tokens_limit < 1)
    fail("--prefill-chunk, --max-concurrent and --max-tokens-limit must be at least 1");
  options.connections = connections;
  options.http_threads = static_cast<int>(http_workers);

  // SIGINT stops the server at once; SIGTERM drains it first (drain_then_stop). Either way loaded sessions are
  // then snapshotted so a restart replays little. (Sessions survive a SIGKILL too: every token is in their
  // fsynced logs; see server/session_store.h.)
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
      if (signal == SIGTERM) drain(server, stop_signals, drain_seconds);
      server.stop();
    });
    server.run();
    pthread_kill(stopper.native_handle(), SIGTERM);  // no-op when the stopper already returned
    stopper.join();
  }
  sessions.save_all();
  std::fprintf(stderr, "sinklm serve: stopped; %lld sessions saved in %s\n",
               static_cast<long long>(sessions.in_memory() + sessions.on_disk()), args.get("session-dir", "sinklm-sessions").c_str());
  return 0;
}

}  // namespace sinklm
