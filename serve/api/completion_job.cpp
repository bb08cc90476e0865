#include "serve/api/completion_job.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "serve/api/completion_response.h"
#include "serve/api/tokenize.h"
#include "serve/openai_server.h"
#include "serve/http/request_error.h"

namespace sinklm {

JobRunner::JobRunner(const ServerOptions& options, CachedDecoder& decoder, const TextCodec& codec,
                     SessionStore& sessions, GenerationWorker& worker, ServerMetrics& metrics)
    : options_(options), decoder_(decoder), codec_(codec), sessions_(sessions), worker_(worker), metrics_(metrics) {}

// The ids of one prompt: the client's ids (checked against the vocabulary) or the tokenized text.
std::vector<int64_t> JobRunner::prompt_ids(const PromptInput& p) const {
  const int64_t vocab = text_vocabulary(codec_, decoder_.config());
  if (!p.is_ids) return codec_.encode(p.text);
  for (int64_t id : p.ids)
    if (id < 0 || id >= vocab)
      throw RequestError(400, "invalid_value", str("'prompt': token id ", id, " is outside the vocabulary [0, ", vocab, ")"), "prompt");
  return p.ids;
}

namespace {

// The seed of a request that names none: a fresh one each time, never the same after a restart (OpenAI's
// sampling without a seed is not repeatable either). Below 2^63, so it reads back as the integer `seed` takes.
uint64_t fresh_seed() {
  static std::mutex mutex;
  static std::mt19937_64 draw(std::random_device{}() ^
                              static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::lock_guard<std::mutex> lock(mutex);
  return draw() >> 1;
}

}  // namespace

std::shared_ptr<Job> JobRunner::start(const std::string& body, bool chat, const std::string& session_header) {
  CompletionRequest request =
      parse_completion_request(body, chat, session_header, {options_.max_tokens_limit, fresh_seed()});
  std::vector<std::vector<int64_t>> prompts;
  for (const auto& p : request.prompts) {
    prompts.push_back(prompt_ids(p));
    if (static_cast<int64_t>(prompts.back().size()) > options_.max_prompt_tokens)
      throw RequestError(400, "prompt_too_long", str("the prompt has ", prompts.back().size(), " tokens; the limit is ", options_.max_prompt_tokens));
  }
  const int64_t vocab = text_vocabulary(codec_, decoder_.config());
  for (const auto& [id, bias] : request.generation.sampling.logit_bias)
    if (id >= vocab)
      throw RequestError(400, "invalid_value", str("'logit_bias': token id ", id, " is outside the vocabulary [0, ", vocab, ")"),
                         str("logit_bias.", id));
  const int64_t choices = static_cast<int64_t>(prompts.size()) * request.n;
  if (choices > options_.max_concurrent)
    throw RequestError(400, "invalid_value", str("'n' x prompts = ", choices, " choices; the server runs at most ", options_.max_concurrent, " at once"), "n");
  if (worker_.load() + choices > options_.max_concurrent)
    throw RequestError(429, "too_many_streams", str("the server is generating for ", options_.max_concurrent, " streams; retry shortly"));
  auto job = std::make_shared<Job>();
  job->chat = request.chat;
  job->streaming = request.stream;
  job->include_usage = request.include_usage;
  job->seed = request.generation.sampling.seed;
  job->stream_state = request.stream_state;
  job->echo = request.echo;
  job->logprobs = request.logprobs;
  job->warnings = request.warnings;
  job->created = unix_time();
  job->id = str(request.chat ? "chatcmpl-" : "cmpl-", next_id_++);
  for (const auto& w : job->warnings) std::fprintf(stderr, "sinklm serve: %s: warning: %s\n", job->id.c_str(), w.c_str());
  if (!request.session_id.empty()) job->session = sessions_.acquire(request.session_id);
  try {
    for (size_t p = 0; p < prompts.size(); ++p)
      for (int64_t j = 0; j < request.n; ++j) job->choices.push_back(make_choice(job, request, p, prompts[p], j));
  } catch (...) {
    if (job->session) sessions_.release(job->session);
    throw;
  }
  job->unfinished = job->choices.size();
  for (const auto& c : job->choices) {
    metrics_.prompt_tokens += c->prompt_tokens;
    worker_.submit(c->generation);
  }
  return job;
}

// Choice j of prompt `prompt` (ids `ids`): its stream, its generation, and the session's log of its prompt.
std::unique_ptr<Choice> JobRunner::make_choice(const std::shared_ptr<Job>& job, const CompletionRequest& request,
                                               size_t prompt, const std::vector<int64_t>& ids, int64_t j) {
  const auto& model = decoder_.config();
  auto choice = std::make_unique<Choice>();
  choice->index = static_cast<int64_t>(prompt) * request.n + j;
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
    choice->own_stream = sessions_.new_stream();
    stream = choice->own_stream.get();
    g.prompt = sink_prefix(model);
  }
  const int64_t echo_from = g.prompt.size();
  g.prompt.insert(g.prompt.end(), ids.begin(), ids.end());
  logged.insert(logged.end(), ids.begin(), ids.end());
  if (request.echo && request.logprobs >= 0) g.echo_from = echo_from;
  g.logprobs = request.logprobs;
  const PromptInput& input = request.prompts[prompt];
  if (request.echo) choice->echo_text = input.is_ids ? codec_.decode(ids) : input.text;
  choice->prompt_tokens = j == 0 ? static_cast<int64_t>(g.prompt.size()) : 0;
  std::weak_ptr<Job> weak = job;
  const size_t at = job->choices.size();
  choice->generation = std::make_shared<Generation>(std::move(g), *stream, codec_, model,
                                                    [this, weak, at](const GenerationDelta& d) { on_delta(weak, at, d); });
  if (job->session) job->session->log->append(logged);
  return choice;
}

void JobRunner::finish_session(Job& job) {
  if (!job.session || job.session_handed_back.exchange(true)) return;
  try {
    sessions_.finish_request(*job.session);
  } catch (...) {
    sessions_.release(job.session);
    throw;
  }
  sessions_.release(job.session);
}

std::vector<ChoiceResult> JobRunner::wait_for_results(Job& job) {
  std::vector<ChoiceResult> results(job.choices.size());
  {
    std::unique_lock<std::mutex> lock(job.mutex);
    job.changed.wait(lock, [&] { return job.done(); });
    for (const auto& [i, d] : job.deltas) {
      ChoiceResult& r = results[i];
      r.text += d.text;
      r.completion_tokens = d.completion_tokens;
      if (!d.finish_reason.empty()) r.finish = d.finish_reason;
      if (!d.error.empty()) r.error = d.error;
      if (d.failure != GenerationFailure::None) r.failure = d.failure;
      r.logprobs.insert(r.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    }
  }
  finish_session(job);
  return results;
}

// On the worker thread. A session's sampled tokens reach its log before the delta can be sent.
void JobRunner::on_delta(const std::weak_ptr<Job>& weak, size_t at, const GenerationDelta& d) {
  auto job = weak.lock();
  if (!job) return;
  Choice& choice = *job->choices[at];
  metrics_.generated_tokens += d.completion_tokens - choice.tokens_counted;
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

}  // namespace sinklm
