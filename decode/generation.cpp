#include "decode/generation.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"

namespace sinklm {

Generation::Generation(GenerationRequest request, DecoderStream& stream, const TextCodec& codec,
                       const ModelConfig& model, Listener listener)
    : request_(std::move(request)),
      stream_(stream),
      codec_(codec),
      end_of_text_(request_.stop_at_end_of_text ? model.eos_token_id : -1),
      listener_(std::move(listener)),
      sampler_(request_.sampling, std::min(model.tokenizer_vocab_size, codec.vocab_size())) {
  if (request_.prompt.empty()) fail("the prompt is empty: give at least one token of text");
  if (request_.max_tokens < 0) fail("max_tokens must be at least 0, got ", request_.max_tokens);
  for (const auto& s : request_.stop)
    if (s.empty()) fail("stop: empty stop strings are not allowed");
}

std::vector<int64_t> Generation::next_chunk(int64_t preferred) const {
  if (prompt_fed_ < request_.prompt.size()) {
    const size_t take = std::min<size_t>(stream_.max_chunk(preferred), request_.prompt.size() - prompt_fed_);
    return {request_.prompt.begin() + prompt_fed_, request_.prompt.begin() + prompt_fed_ + take};
  }
  return {generated_.back()};
}

TokenLogprob Generation::score(const torch::Tensor& row, int64_t id) const {
  auto logprobs = torch::log_softmax(row.reshape({-1}).to(torch::kCPU, torch::kFloat32), 0);  // [V]
  const auto values = logprobs.accessor<float, 1>();
  TokenLogprob out;
  out.id = id;
  out.logprob = values[id];
  // Alternatives among the tokens a client can receive (the log-probs themselves stay over the whole
  // vocabulary), in the sampler's own order: a greedy token heads its list.
  for (int64_t alternative : sampler_.most_likely(row, request_.logprobs))
    out.top.emplace_back(alternative, values[alternative]);
  return out;
}

// Rows of `logits` [fed, V] follow prompt[start + r]; token j is scored by the row after token j - 1, which for
// the first token of a chunk is the previous chunk's last row.
void Generation::score_prompt(size_t start, size_t fed, const torch::Tensor& logits) {
  const size_t from = request_.echo_from;
  for (size_t j = std::max(start, from); j < start + fed; ++j) {
    if (j == from) {
      TokenLogprob first;
      first.id = request_.prompt[j];
      first.scored = false;
      pending_logprobs_.push_back(first);
      continue;
    }
    const torch::Tensor row = j > start ? logits[j - 1 - start] : previous_row_;
    pending_logprobs_.push_back(score(row, request_.prompt[j]));
  }
  previous_row_ = logits[fed - 1].clone();  // a copy: a view would keep the step's whole [rows, V] logits alive
}

void Generation::after_step(size_t fed, const torch::Tensor& logits) {
  if (prompt_fed_ < request_.prompt.size()) {
    const bool echoing = wants_all_logits();
    const size_t start = prompt_fed_;
    prompt_fed_ += fed;
    if (echoing) score_prompt(start, fed, logits);
    if (prompt_fed_ < request_.prompt.size()) return;  // more prompt to stream in
    if (request_.max_tokens == 0) return finish("length");
  }
  const torch::Tensor last = logits[logits.size(0) - 1];  // [V]
  last_fed_ = true;
  const int64_t token = sampler_.next(last);
  if (request_.logprobs >= 0) pending_logprobs_.push_back(score(last, token));
  if (token == end_of_text_) return finish("stop");
  generated_.push_back(token);
  last_fed_ = false;
  std::string decoded = codec_.decode(generated_);
  size_t cut = std::string::npos;
  for (const auto& s : request_.stop) cut = std::min(cut, decoded.find(s));
  if (cut != std::string::npos) {
    text_ = decoded.substr(0, cut);
    return finish("stop");
  }
  text_ = std::move(decoded);
  if (static_cast<int64_t>(generated_.size()) >= request_.max_tokens) return finish("length");
  emit_text(false);
}

void Generation::emit_text(bool final) {
  size_t ready = final ? text_.size() : complete_utf8_prefix(text_);
  if (!final) {  // hold back a tail that could still grow into a stop string
    size_t hold = 0;
    for (const auto& s : request_.stop)
      for (size_t len = std::min(s.size() - 1, ready); len > hold; --len)
        if (text_.compare(ready - len, len, s, 0, len) == 0) {
          hold = len;
          break;
        }
    ready -= hold;
  }
  GenerationDelta delta;
  delta.error = error_;
  delta.failure = failure_;
  if (ready > emitted_) delta.text = text_.substr(emitted_, ready - emitted_);
  emitted_ = std::max(emitted_, ready);
  delta.finish_reason = finish_reason_;
  delta.prompt_tokens = request_.prompt.size();
  delta.completion_tokens = generated_.size();
  delta.stream_length = stream_.length();
  delta.kv_entries = stream_.entries();
  if (delta.text.empty() && !final) return;
  delta.tokens.assign(generated_.begin() + tokens_reported_, generated_.end());
  tokens_reported_ = generated_.size();
  delta.logprobs.swap(pending_logprobs_);
  listener_(delta);
}

void Generation::abort(GenerationFailure why, const std::string& message) {
  failure_ = why;
  error_ = message;
  finish("error");
}

void Generation::finish(const std::string& reason) {
  finish_reason_ = reason;
  emit_text(true);
}

std::vector<int64_t> Generation::unfed() const {
  return last_fed_ || generated_.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{generated_.back()};
}

GenerationEngine::GenerationEngine(CachedDecoder& decoder, int64_t prefill_chunk)
    : decoder_(decoder), prefill_chunk_(prefill_chunk) {}

void GenerationEngine::add(std::shared_ptr<Generation> generation) { active_.push_back(std::move(generation)); }

int64_t GenerationEngine::step() {
  if (active_.empty()) return 0;
  std::vector<StreamChunk> chunks;
  int64_t tokens = 0;
  std::vector<Generation*> stepping;
  for (const auto& g : active_) {
    if (g->cancel_requested()) {
      g->abort(GenerationFailure::Cancelled, "cancelled: the client went away");
      continue;
    }
    auto ids = g->next_chunk(prefill_chunk_);
    try {  // a stream that cannot take the chunk (a full cache at its limit) ends alone
      g->stream().policy().check_append(g->stream().length(), ids.size());
    } catch (const UserError& e) {
      g->abort(GenerationFailure::ContextFull, e.what());
      continue;
    }
    tokens += ids.size();
    const bool logits = g->reads_logits(ids.size());
    chunks.push_back({&g->stream(), std::move(ids), logits});
    stepping.push_back(g.get());
  }
  if (!chunks.empty()) {
    // Every token's logits only when a generation echoes its prompt; the others take their last row.
    const bool all = std::any_of(stepping.begin(), stepping.end(), [](Generation* g) { return g->wants_all_logits(); });
    auto logits = decoder_.step(chunks, all ? LogitsWanted::All : LogitsWanted::Last);
    for (size_t i = 0; i < stepping.size(); ++i) {
      const auto& rows = logits[i];  // [T, V], [1, V] or undefined (no logits wanted)
      const bool last_only = rows.defined() && !stepping[i]->wants_all_logits();
      stepping[i]->after_step(chunks[i].ids.size(), last_only ? rows.narrow(0, rows.size(0) - 1, 1) : rows);
    }
  }
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](const auto& g) { return g->finished(); }),
                active_.end());
  return tokens;
}

KvUsage GenerationEngine::kv_usage() const {
  KvUsage usage;
  for (const auto& g : active_) usage.add(g->stream());
  return usage;
}

void GenerationEngine::abort_all(GenerationFailure why, const std::string& message) {
  for (const auto& g : active_)
    if (!g->finished()) g->abort(why, message);
  active_.clear();
}

}  // namespace sinklm
