#include "serve/cached_decoder.h"

#include <torch/torch.h>

#include "core/error.h"

namespace sinklm {

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
  const auto& c = config();
  const int64_t H = c.num_heads, D = c.head_dim();
  std::vector<int64_t> ids, offsets;
  for (const auto& chunk : chunks) {
    offsets.push_back(ids.size());
    ids.insert(ids.end(), chunk.ids.begin(), chunk.ids.end());
  }
  const int64_t N = ids.size();
  auto x = model_->gpt_neox->embed_in(torch::tensor(ids, torch::kInt64).to(device()));  // [N, C]
  int64_t layer_index = 0;
  for (const auto& module : *model_->gpt_neox->layers) {
    auto* layer = module->as<GPTNeoXLayer>();
    auto qkv = layer->attention->query_key_value(layer->input_layernorm(x)).view({N, H, 3 * D});  // [N, H, 3D]
    auto sink_logit = layer->attention->sink_logit_or_undefined();
    std::vector<torch::Tensor> attended;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const int64_t T = chunks[i].ids.size();
      auto part = qkv.narrow(0, offsets[i], T).permute({1, 0, 2});  // [H, T, 3D]
      auto out = chunks[i].stream->cache_->attend(layer_index, part.narrow(-1, 0, D), part.narrow(-1, D, D),
                                                  part.narrow(-1, 2 * D, D).contiguous(), sink_logit);  // [H, T, D]
      attended.push_back(out.permute({1, 0, 2}).reshape({T, H * D}));
    }
    auto attention_out = layer->attention->dense(torch::cat(attended, 0));  // [N, C]
    if (c.parallel_residual) {
      x = x + attention_out + layer->mlp(layer->post_attention_layernorm(x));
    } else {
      x = x + attention_out;
      x = x + layer->mlp(layer->post_attention_layernorm(x));
    }
    ++layer_index;
  }
  std::vector<torch::Tensor> logits;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int64_t T = chunks[i].ids.size();
    auto rows = wanted == LogitsWanted::All ? x.narrow(0, offsets[i], T) : x.narrow(0, offsets[i] + T - 1, 1);
    logits.push_back(model_->embed_out(model_->gpt_neox->final_layer_norm(rows)).to(torch::kFloat32));
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
