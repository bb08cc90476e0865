// The OpenAI-compatible HTTP server over sinklm's token streams.
//
//   POST /v1/completions        {"prompt": "...", "max_tokens", "temperature", "top_p", "top_k", "seed",
//                                "stop", "stream", "session"}
//   POST /v1/chat/completions   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}], ...}
//   POST /v1/sessions           -> {"id": "sess_..."}; DELETE /v1/sessions/{id}
//   GET  /v1/sessions/{id}      -> {"id", "tokens" (the stream length), "kv_entries", "text"}
//   GET  /v1/models (each model has "max_model_len", lm-eval's max_length: the longest request scored with its whole
//        prompt in the cache; and a "sinklm" model card: checkpoint, sink mode, cache policy and window),
//   GET  /health ({"status": "ok"}, or 503 {"status": "draining"} while draining), GET /metrics (Prometheus text)
//   GET  / (and /chat.js, /chat.css, /favicon.svg): the chat page (serve/chat_page/), unless --no-ui
//
// `stream: true` answers with server-sent events (`data: {json}` chunks, then `data: [DONE]`). A request that sends
// "sinklm": {"stream_state": true} gets "sinklm": {"session", "stream_length", "kv_entries"} in every chunk as of
// that chunk, the last one after the whole request (a non-streamed response carries it once). A `session`
// (body field or X-Session-Id header) continues one conversation's stream: its KV cache stays between
// requests (send only the new text / messages), so a chat goes on indefinitely in constant memory.
// Chat template for plain language models: every message becomes "<Role>: <content>\n" (System, User,
// Assistant), then "Assistant:" prompts the reply; "\nUser:" is always a stop string.
// Every bad request gets a 4xx with {"error": {"message", "type", "param", "code"}}; others keep being served.
// With an API key, /v1/* requires `Authorization: Bearer <key>` (serve/http/api_key.h).
#pragma once
#include <memory>
#include <string>

#include "serve/http/connection_front.h"
#include "serve/sessions/session_store.h"
#include "data/tokenizers/text_codec.h"

namespace sinklm {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 = any free port
  std::string model_name = "sinklm";
  std::string checkpoint = "sinklm";  // the checkpoint's directory name, for the model card
  bool ui = true;  // serve the chat page at GET /
  std::string api_key;  // "" = no authentication
  int64_t max_prompt_tokens = 16384;
  int64_t max_tokens_limit = 4096;  // the largest max_tokens a request may ask for
  int64_t max_concurrent = 64;      // generations queued or running
  int64_t prefill_chunk = 256;
  // Deadlines and caps of client connections, the workers serving complete requests and the largest
  // request (serve/http/connection_front.h).
  ConnectionLimits connections;
  // Sessions (serve/sessions/session_store.h): where they live, how many stay loaded and exist in all, how
  // often their K/V is snapshotted.
  std::string session_dir = "sinklm-sessions";
  int64_t sessions_in_memory = 64;
  int64_t max_sessions = 10000;
  SessionDurability durability;
  double drain_seconds = 30;  // on SIGTERM, how long running requests may take to finish (0 = stop)
};

class OpenAiServer {
 public:
  OpenAiServer(ServerOptions options, CachedDecoder& decoder, const TextCodec& codec, SessionStore& sessions);
  ~OpenAiServer();
  int bind();   // returns the port
  void run();   // serves until stop()
  void stop();  // thread-safe
  // Draining before a stop: /health answers 503 {"status": "draining"}, every other new request 503 with
  // Retry-After, and requests already being served (streams included) go on. Thread-safe.
  void begin_drain();
  int64_t requests_in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sinklm
