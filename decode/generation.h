// Text generation on token streams, many at once (continuous batching).
//
// A Generation appends its prompt to a DecoderStream in chunks (a prompt longer than the cache streams
// through it, evicting as it goes), then samples one token per step (only ids the codec can decode; never a
// sink token or vocabulary padding) until max_tokens, the end-of-text token
// or a stop string. Text is emitted incrementally and only in whole UTF-8 characters; text that might be the
// start of a stop string is held back until it is known not to be one.
// GenerationEngine::step() runs one batched forward pass over every active generation; generations join
// (add) and leave (when finished) between steps.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "decode/cached_decoder.h"
#include "data/tokenizers/text_codec.h"
#include "decode/token_sampler.h"

namespace sinklm {

struct GenerationRequest {
  std::vector<int64_t> prompt;  // ids appended to the stream first (at least one)
  SamplingParams sampling;
  int64_t max_tokens = 16;  // 0: only feed (and with echo_from, score) the prompt
  int64_t logprobs = -1;    // -1: none; k >= 0: every reported token's log-prob and its k most likely alternatives
  // >= 0: report the log-probs of prompt[echo_from..] too (the first of them null: OpenAI's echo)
  int64_t echo_from = -1;
  std::vector<std::string> stop;  // stop strings; the text ends before the first one found
  bool stop_at_end_of_text = true;
};

// A token's log-probability under the model (log-softmax over the whole vocabulary) and the `logprobs`
// most likely tokens at that position, most likely first.
struct TokenLogprob {
  int64_t id = 0;
  bool scored = true;  // false: the first echoed prompt token (nothing before it is scored)
  double logprob = 0;
  std::vector<std::pair<int64_t, double>> top;
};

// Why a generation ended with "error"; the server maps each to an HTTP status (serve/openai_server.cpp).
enum class GenerationFailure {
  None,
  ContextFull,     // the stream cannot take the next chunk (a literal cache at its limit)
  Cancelled,       // its client went away
  ServerStopping,  // the server is stopping: the generation ends at the step it is in
  StepFailed,      // the forward pass threw
  StorageFull,     // a session's tokens could not be made durable: no space left (core/error.h: StorageError)
  StorageFailed,   // ... an I/O error
};

struct GenerationDelta {
  std::string text;                // new text, whole UTF-8 characters
  std::vector<int64_t> tokens;     // ids sampled since the last delta (all reach the stream; end-of-text never)
  std::vector<TokenLogprob> logprobs;  // with logprobs/echo: the tokens scored since the last delta
  std::string finish_reason;       // "" while running, then "stop", "length" or "error"
  std::string error;               // with "error": what went wrong (a UserError message)
  GenerationFailure failure = GenerationFailure::None;  // with "error": why
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t stream_length = 0, kv_entries = 0;  // the stream after this delta (a live view of the bounded cache)
};

class Generation {
 public:
  using Listener = std::function<void(const GenerationDelta&)>;
  Generation(GenerationRequest request, DecoderStream& stream, const TextCodec& codec, const ModelConfig& model,
             Listener listener);

  DecoderStream& stream() { return stream_; }
  bool finished() const { return !finish_reason_.empty(); }
  // The ids to feed in the next step: a prompt chunk, or the last sampled token.
  std::vector<int64_t> next_chunk(int64_t preferred) const;
  // Whether after_step wants the logits of every fed token (echoing the prompt) rather than the last one's.
  bool wants_all_logits() const { return request_.echo_from >= 0 && prompt_fed_ < request_.prompt.size(); }
  // Whether after_step reads the logits of a chunk of `fed` tokens: not for a prompt's chunk before its last
  // (unless echoing), so the LM head skips it.
  bool reads_logits(size_t fed) const { return wants_all_logits() || prompt_fed_ + fed >= request_.prompt.size(); }
  // The step fed next_chunk(); `logits` [T, V] for its tokens (wants_all_logits) or [1, V] after its last,
  // undefined where reads_logits() was false.
  void after_step(size_t fed, const torch::Tensor& logits);
  // Sampled but never fed to the stream (the last token of a finished generation): a session feeds it first
  // next time, so its cache stays the whole conversation.
  std::vector<int64_t> unfed() const;
  const std::string& text() const { return text_; }
  void abort(GenerationFailure why, const std::string& message);  // finishes with "error"
  // Thread-safe: the engine aborts the generation at its next step (a client that went away).
  void request_cancel() { cancel_requested_ = true; }
  bool cancel_requested() const { return cancel_requested_; }

 private:
  void finish(const std::string& reason);
  void emit_text(bool final);
  void score_prompt(size_t start, size_t fed, const torch::Tensor& logits);
  TokenLogprob score(const torch::Tensor& row, int64_t id) const;

  GenerationRequest request_;
  DecoderStream& stream_;
  const TextCodec& codec_;
  int64_t end_of_text_;
  Listener listener_;
  TokenSampler sampler_;
  size_t prompt_fed_ = 0;
  std::vector<int64_t> generated_;  // sampled ids; all but possibly the last are in the stream
  bool last_fed_ = true;
  std::string text_;     // decoded text, cut at a stop string
  size_t emitted_ = 0;   // bytes of text_ already sent
  size_t tokens_reported_ = 0;  // generated_ ids already in a delta
  std::vector<TokenLogprob> pending_logprobs_;
  torch::Tensor previous_row_;  // echo: the logits after the previous chunk's last token [V]
  std::string finish_reason_, error_;
  GenerationFailure failure_ = GenerationFailure::None;
  std::atomic<bool> cancel_requested_{false};
};

class GenerationEngine {
 public:
  GenerationEngine(CachedDecoder& decoder, int64_t prefill_chunk);
  void add(std::shared_ptr<Generation> generation);
  // One batched forward pass over the active generations; finished ones leave. Returns tokens processed.
  int64_t step();
  size_t active() const { return active_.size(); }
  KvUsage kv_usage() const;  // held by the active generations' streams
  void abort_all(GenerationFailure why, const std::string& message);  // every active generation ends with "error"

 private:
  CachedDecoder& decoder_;
  int64_t prefill_chunk_;
  std::vector<std::shared_ptr<Generation>> active_;
};

}  // namespace sinklm
