#include "serve/generation.h"

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
  if (request_.max_tokens < 1) fail("max_tokens must be at least 1, got ", request_.max_tokens);
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

void Generation::after_step(size_t fed, const torch::Tensor& logits) {
  if (prompt_fed_ < request_.prompt.size()) {
    prompt_fed_ += fed;
    if (prompt_fed_ < request_.prompt.size()) return;  // more prompt to stream in
  }
  last_fed_ = true;
  const int64_t token = sampler_.next(logits);
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
  if (ready > emitted_) delta.text = text_.substr(emitted_, ready - emitted_);
  emitted_ = std::max(emitted_, ready);
  delta.finish_reason = finish_reason_;
  delta.prompt_tokens = request_.prompt.size();
  delta.completion_tokens = generated_.size();
  if (!delta.text.empty() || final) listener_(delta);
}

void Generation::abort(const std::string& message) {
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
      g->abort("cancelled");
      continue;
    }
    auto ids = g->next_chunk(prefill_chunk_);
    try {  // a stream that cannot take the chunk (a full cache at its limit) ends alone
      g->stream().policy().check_append(g->stream().length(), ids.size());
    } catch (const UserError& e) {
      g->abort(e.what());
      continue;
    }
    tokens += ids.size();
    chunks.push_back({&g->stream(), std::move(ids)});
    stepping.push_back(g.get());
  }
  if (!chunks.empty()) {
    auto logits = decoder_.step(chunks, LogitsWanted::Last);
    for (size_t i = 0; i < stepping.size(); ++i) stepping[i]->after_step(chunks[i].ids.size(), logits[i]);
  }
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](const auto& g) { return g->finished(); }),
                active_.end());
  return tokens;
}

int64_t GenerationEngine::kv_entries() const {
  int64_t total = 0;
  for (const auto& g : active_) total += g->stream().entries();
  return total;
}

void GenerationEngine::abort_all(const std::string& message) {
  for (const auto& g : active_)
    if (!g->finished()) g->abort(message);
  active_.clear();
}

}  // namespace sinklm
