#include "decode/cached_decoder.h"

#include <torch/torch.h>

#include <map>
#include <tuple>

#include "core/error.h"

namespace sinklm {
namespace {

// The serving back-end of the decoder layer: the chunks of many streams packed in one batch row
// ([1, H, N, D], chunk i at columns offsets[i] .. offsets[i] + T_i). Decode tokens of pooled caches that
// share a page attend together, a lone decode token as a batch of one (DecodeBatch); every other chunk
// attends against its own cache.
class PackedStreamAttention : public AttentionBackend {
 public:
  PackedStreamAttention(const std::vector<StreamChunk>& chunks, const std::vector<int64_t>& offsets,
                        const std::vector<StreamCache*>& caches, bool batched, torch::Device device)
      : chunks_(chunks), offsets_(offsets), caches_(caches), alone_(chunks.size(), true) {
    if (batched) group_decode_tokens(device);
  }

  int64_t batched_tokens() const {
    int64_t n = 0;
    for (const auto& group : groups_) n += group.columns.size(0);
    return n;
  }

  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SinkColumn& sink) override {
    // A group's rows, [n, H, 1, D] float32 (a DecodeBatch's input; the row is bf16 when a prompt's chunk shares
    // the step): a view when the group is the whole row in order (every chunk decodes).
    auto rows = [](const Group& group, const torch::Tensor& x) {
      return (group.whole_row ? x[0] : x[0].index_select(1, group.columns)).transpose(0, 1).unsqueeze(2).to(torch::kFloat32);
    };
    auto attend_group = [&](Group& group) {
      return group.batch->attend(layer, rows(group, q), rows(group, k), rows(group, v), sink)
          .to(q.scalar_type()).squeeze(2).transpose(0, 1);  // [H, n, D]
    };
    if (groups_.size() == 1 && groups_[0].whole_row) return attend_group(groups_[0]).unsqueeze(0);
    auto out = torch::empty_like(q);  // [1, H, N, D]
    for (size_t i = 0; i < chunks_.size(); ++i) {
      if (!alone_[i]) continue;
      const int64_t offset = offsets_[i], T = chunks_[i].ids.size();
      out[0].narrow(1, offset, T).copy_(caches_[i]->attend(layer, q[0].narrow(1, offset, T), k[0].narrow(1, offset, T),
                                                           v[0].narrow(1, offset, T).contiguous(), sink));
    }
    for (auto& group : groups_) out[0].index_copy_(1, group.columns, attend_group(group));
    return out;
  }

 private:
  struct Group {
    std::unique_ptr<DecodeBatch> batch;
    torch::Tensor columns;   // [n] the group's columns in the packed row
    bool whole_row = false;  // columns are 0..N-1 in order
  };

  // Decode tokens grouped by (pool page, position rule); an unpooled cache is a group of its own. The batch
  // factory decides whether a group batches.
  void group_decode_tokens(torch::Device device) {
    std::map<std::tuple<const KvPool*, int64_t, PositionRule>, std::vector<size_t>> candidates;
    for (size_t i = 0; i < chunks_.size(); ++i) {
      if (chunks_[i].ids.size() != 1) continue;
      const auto [pool, page] = caches_[i]->pool_page();
      // Unpooled: keyed by -1 - i, a page index no pool has.
      candidates[{pool, pool ? page : -1 - static_cast<int64_t>(i), chunks_[i].stream->position_rule()}].push_back(i);
    }
    const int64_t row = offsets_.empty() ? 0 : offsets_.back() + chunks_.back().ids.size();  // N
    for (const auto& [key, members] : candidates) {
      std::vector<StreamCache*> caches;
      std::vector<int64_t> columns;
      bool in_order = true;
      for (size_t i : members) {
        in_order = in_order && offsets_[i] == static_cast<int64_t>(columns.size());
        caches.push_back(caches_[i]);
        columns.push_back(offsets_[i]);
      }
      auto batch = make_decode_batch(caches);
      if (!batch) continue;
      for (size_t i : members) alone_[i] = false;
      const bool whole_row = in_order && static_cast<int64_t>(columns.size()) == row;
      groups_.push_back({std::move(batch), torch::tensor(columns, torch::kInt64).to(device), whole_row});
    }
  }

  const std::vector<StreamChunk>& chunks_;
  const std::vector<int64_t>& offsets_;
  const std::vector<StreamCache*>& caches_;
  std::vector<bool> alone_;  // attends on its own
  std::vector<Group> groups_;
};

// Packs every projection's weight for few-row products (model/kernels/few_row_matmul.h): a decode step multiplies
// each weight by one row per decoding stream.
void pack_projections_for_decoding(torch::nn::Module& model) {
  for (const auto& module : model.modules())
    if (auto* projection = module->as<ProjectionImpl>()) projection->pack_for_few_rows();
}

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

int64_t DecoderStream::kv_bytes() const { return cache_ ? cache_->kv_bytes() : 0; }

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

CachedDecoder::CachedDecoder(GPTNeoXForCausalLM model) : model_(std::move(model)), pools_(device()) {
  model_->eval();
  pack_projections_for_decoding(*model_);
}

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
  if (batched_decode_) pool_decoding_caches(chunks);
  PackedStreamAttention backend(chunks, offsets, caches, batched_decode_, device());
  batched_decode_tokens_ += backend.batched_tokens();
  auto input = torch::tensor(ids, torch::kInt64).to(device()).unsqueeze(0);  // [1, N]
  auto x = model_->hidden_states(input, backend)[0];                          // [N, C]
  // The wanted rows go through the LM head in one product: its weight ([V, C], the largest matrix) is then
  // read once per step, not once per stream.
  std::vector<int64_t> rows, first_row;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int64_t T = chunks[i].ids.size();
    first_row.push_back(rows.size());
    if (!chunks[i].logits) continue;
    for (int64_t r = wanted == LogitsWanted::All ? 0 : T - 1; r < T; ++r) rows.push_back(offsets[i] + r);
  }
  torch::Tensor all_logits;  // [M, V]
  if (!rows.empty()) {
    if (static_cast<int64_t>(rows.size()) < x.size(0))
      x = x.index_select(0, torch::tensor(rows, torch::kInt64).to(device()));  // [M, C]
    all_logits = model_->embed_out(x).to(torch::kFloat32);
  }
  std::vector<torch::Tensor> logits;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int64_t T = chunks[i].ids.size();
    logits.push_back(chunks[i].logits ? all_logits.narrow(0, first_row[i], wanted == LogitsWanted::All ? T : 1)
                                      : torch::Tensor());
    chunks[i].stream->cache_->advance(T);
    chunks[i].stream->record(chunks[i].ids);
  }
  return logits;
}

void CachedDecoder::pool_decoding_caches(const std::vector<StreamChunk>& chunks) {
  int64_t decoding = 0;
  for (const auto& chunk : chunks) decoding += chunk.ids.size() == 1;
  if (decoding < 2) return;  // a lone decoding stream gains nothing from a pool slot
  for (const auto& chunk : chunks)
    if (chunk.ids.size() == 1 && chunk.stream->policy().fills_budget()) chunk.stream->cache_->adopt_pool(pools_);
}

torch::Tensor CachedDecoder::recompute_step(const StreamChunk& chunk, LogitsWanted wanted) {
  auto* stream = chunk.stream;
  std::vector<torch::Tensor> rows;
  for (size_t i = 0; i < chunk.ids.size(); ++i) {
    stream->record({chunk.ids[i]});
    // No K/V is kept: a token whose logits are not returned needs no forward at all.
    const bool returned = chunk.logits && (wanted == LogitsWanted::All || i + 1 == chunk.ids.size());
    if (!returned) continue;
    std::vector<int64_t> held(stream->held_tokens().begin(), stream->held_tokens().end());
    auto input = torch::tensor(held, torch::kInt64).to(device()).unsqueeze(0);  // [1, N]
    torch::Tensor positions;  // cache rule: 0..N-1, the forward's default
    if (stream->position_rule() == PositionRule::Stream)
      positions = torch::tensor(stream->policy().held_positions(stream->length()), torch::kInt64).to(device());
    auto hidden = model_->hidden_states(input, positions)[0];  // [N, C]
    rows.push_back(model_->embed_out(hidden.narrow(0, hidden.size(0) - 1, 1)).to(torch::kFloat32));  // [1, V]
  }
  if (rows.empty()) return {};
  return wanted == LogitsWanted::All ? torch::cat(rows, 0) : rows.back();
}

}  // namespace sinklm
