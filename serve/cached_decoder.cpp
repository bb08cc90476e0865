#include "serve/cached_decoder.h"

#include <torch/torch.h>

#include "core/error.h"

namespace sinklm {
namespace {

// The serving back-end of the decoder layer: the chunks of many streams packed in one batch row
// ([1, H, N, D], chunk i at columns offsets[i] .. offsets[i] + T_i), each attending against its own cache.
class PackedStreamAttention : public AttentionBackend {
 public:
  PackedStreamAttention(const std::vector<StreamChunk>& chunks, const std::vector<int64_t>& offsets,
                        const std::vector<StreamCache*>& caches)
      : chunks_(chunks), offsets_(offsets), caches_(caches) {}

  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& sink_logit) override {
    std::vector<torch::Tensor> attended;  // per chunk [H, T, D]
    for (size_t i = 0; i < chunks_.size(); ++i) {
      const int64_t offset = offsets_[i], T = chunks_[i].ids.size();
      attended.push_back(caches_[i]->attend(layer, q[0].narrow(1, offset, T), k[0].narrow(1, offset, T),
                                            v[0].narrow(1, offset, T).contiguous(), sink_logit));
    }
    return torch::cat(attended, 1).unsqueeze(0);  // [1, H, N, D]
  }

 private:
  const std::vector<StreamChunk>& chunks_;
  const std::vector<int64_t>& offsets_;
  const std::vector<StreamCache*>& caches_;
};

}  // namespace

DecoderStream::DecoderStream(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, KeyRotation rotation,
                             const ModelConfig& model, torch::Device device)
    : policy_(std::move(policy)), rule_(rule) {
  if (!policy_->recomputes()) cache_ = make_stream_cache(policy_, rule, rotation, model, device);
}

DecoderStream::DecoderStream(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, KeyRotation rotation,
                             const ModelConfig& model, torch::Device device, const CacheSnapshot& snapshot,
                             std::vector<int64_t> held_tokens)
    : policy_(std::move(policy)),
      rule_(rule),
      held_tokens_(held_tokens.begin(), held_tokens.end()),
      length_(snapshot.stream_length) {
  if (static_cast<int64_t>(held_tokens_.size()) != policy_->entries_after(length_))
    fail("stream state: ", held_tokens_.size(), " held tokens, but a ", policy_->name(), " ", policy_->label(),
         " cache holds ", policy_->entries_after(length_), " after ", length_, " tokens");
  if (!policy_->recomputes()) cache_ = make_stream_cache(policy_, rule, rotation, model, device, &snapshot);
}

int64_t DecoderStream::entries() const {
  return cache_ ? cache_->entries() : static_cast<int64_t>(held_tokens_.size());
}

int64_t DecoderStream::cache_allocated_entries() const {
  return cache_ ? cache_->allocated_entries() : static_cast<int64_t>(held_tokens_.size());
}

CacheSnapshot DecoderStream::snapshot() const {
  if (cache_) return cache_->snapshot();
  CacheSnapshot s;
  s.stream_length = length_;
  return s;
}

int64_t DecoderStream::max_chunk(int64_t preferred) const {
  return cache_ ? cache_->max_chunk(preferred) : preferred;
}

void DecoderStream::record(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    held_tokens_.push_back(id);
    ++length_;
    if (static_cast<int64_t>(held_tokens_.size()) > policy_->budget())
      held_tokens_.erase(held_tokens_.begin() + policy_->sinks());
  }
}

CachedDecoder::CachedDecoder(GPTNeoXForCausalLM model) : model_(std::move(model)) { model_->eval(); }

torch::Device CachedDecoder::device() const { return model_->embed_out->weight.device(); }

std::vector<torch::Tensor> CachedDecoder::step(const std::vector<StreamChunk>& chunks, LogitsWanted wanted) {
  c10::InferenceMode inference;
  std::vector<StreamChunk> cached;
  std::vector<size_t> cached_index;
  std::vector<torch::Tensor> logits(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto& c = chunks[i];
    SINKLM_ASSERT(!c.ids.empty() && static_cast<int64_t>(c.ids.size()) <= c.stream->max_chunk(c.ids.size()),
                  "chunk of ", c.ids.size(), " tokens");
    for (int64_t id : c.ids)
      if (id < 0 || id >= config().vocab_size) fail("token id ", id, " is outside the vocabulary [0, ", config().vocab_size, ")");
    c.stream->policy().check_append(c.stream->length(), c.ids.size());
    if (c.stream->policy().recomputes()) {
      logits[i] = recompute_step(c, wanted);
    } else {
      cached.push_back(c);
      cached_index.push_back(i);
    }
  }
  if (!cached.empty()) {
    auto out = cached_step(cached, wanted);
    for (size_t j = 0; j < cached.size(); ++j) logits[cached_index[j]] = out[j];
  }
  return logits;
}

std::vector<torch::Tensor> CachedDecoder::cached_step(const std::vector<StreamChunk>& chunks, LogitsWanted wanted) {
  std::vector<int64_t> ids, offsets;
  std::vector<StreamCache*> caches;
  for (const auto& chunk : chunks) {
    offsets.push_back(ids.size());
    ids.insert(ids.end(), chunk.ids.begin(), chunk.ids.end());
    caches.push_back(chunk.stream->cache_.get());
  }
  PackedStreamAttention backend(chunks, offsets, caches);
  auto input = torch::tensor(ids, torch::kInt64).to(device()).unsqueeze(0);  // [1, N]
  auto x = model_->hidden_states(input, backend)[0];                          // [N, C]
  std::vector<torch::Tensor> logits;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int64_t T = chunks[i].ids.size();
    auto rows = wanted == LogitsWanted::All ? x.narrow(0, offsets[i], T) : x.narrow(0, offsets[i] + T - 1, 1);
    logits.push_back(model_->embed_out(rows).to(torch::kFloat32));
    chunks[i].stream->cache_->advance(T);
    chunks[i].stream->record(chunks[i].ids);
  }
  return logits;
}

torch::Tensor CachedDecoder::recompute_step(const StreamChunk& chunk, LogitsWanted wanted) {
  auto* stream = chunk.stream;
  std::vector<torch::Tensor> rows;
  for (int64_t id : chunk.ids) {
    stream->record({id});
    std::vector<int64_t> held(stream->held_tokens().begin(), stream->held_tokens().end());
    auto input = torch::tensor(held, torch::kInt64).to(device()).unsqueeze(0);  // [1, N]
    torch::Tensor positions;  // cache rule: 0..N-1, the forward's default
    if (stream->position_rule() == PositionRule::Stream)
      positions = torch::tensor(stream->policy().held_positions(stream->length()), torch::kInt64).to(device());
    auto hidden = model_->hidden_states(input, positions)[0];  // [N, C]
    rows.push_back(model_->embed_out(hidden.narrow(0, hidden.size(0) - 1, 1)).to(torch::kFloat32));  // [1, V]
  }
  return wanted == LogitsWanted::All ? torch::cat(rows, 0) : rows.back();
}

}  // namespace sinklm
