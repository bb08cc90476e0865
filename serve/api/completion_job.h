// The job runner of the completion routes: one request's choices as generations on the worker, the deltas
// they produce (tagged with their choice, in order) and the session they continue. The routes
// (serve/openai_server.cpp) start a job and send what it produces; serve/api/completion_response.h renders it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "decode/generation.h"
#include "serve/api/completion_request.h"
#include "serve/generation_worker.h"
#include "serve/sessions/session_store.h"

namespace sinklm {

struct ServerOptions;

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
  uint64_t seed = 0;  // the request's, or the fresh one drawn for it: the X-Sinklm-Seed response header
  bool stream_state = false;  // the request asked for the "sinklm" extension object in its responses
  std::vector<std::string> warnings;
  int64_t stream_length = 0, kv_entries = 0;  // the first choice's stream when it finished
  bool done() const { return unfinished == 0; }
};

// What one choice produced, collected for a whole (non-streamed) response.
struct ChoiceResult {
  std::string text, finish, error;
  GenerationFailure failure = GenerationFailure::None;
  int64_t completion_tokens = 0;
  std::vector<TokenLogprob> logprobs;
};

class JobRunner {
 public:
  JobRunner(const ServerOptions& options, CachedDecoder& decoder, const TextCodec& codec, SessionStore& sessions,
            GenerationWorker& worker, ServerMetrics& metrics);

  // Parses a request body (serve/api/completion_request.h), tokenizes its prompts, takes each choice's stream (the
  // session's, or a new one) and hands the generations to the worker. A session's new tokens go to its log
  // before the worker sees them. Throws RequestError for what the client must change.
  std::shared_ptr<Job> start(const std::string& body, bool chat, const std::string& session_header);
  // Waits for every choice, hands the session back (finish_session) and returns each choice's result.
  std::vector<ChoiceResult> wait_for_results(Job& job);
  // Once every choice has finished: the session's log is fsynced (and a snapshot written when due) before
  // the response that completes the request is sent; then the session is free for the next request. Once
  // per job; later calls return at once.
  void finish_session(Job& job);

 private:
  std::vector<int64_t> prompt_ids(const PromptInput& p) const;
  std::unique_ptr<Choice> make_choice(const std::shared_ptr<Job>& job, const CompletionRequest& request, size_t prompt,
                                      const std::vector<int64_t>& ids, int64_t j);
  void on_delta(const std::weak_ptr<Job>& weak, size_t at, const GenerationDelta& d);

  const ServerOptions& options_;
  CachedDecoder& decoder_;
  const TextCodec& codec_;
  SessionStore& sessions_;
  GenerationWorker& worker_;
  ServerMetrics& metrics_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace sinklm
