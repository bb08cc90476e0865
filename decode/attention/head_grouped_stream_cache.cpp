// The stream cache of a head-aware policy (decode/cache/kv_cache_policy.h: HeadAwareCache): one cache per layer and
// head group, each a one-layer cache of the group's policy over the group's heads (relative or literal, as
// asked), so a head group attends exactly as a cache of its own policy would, with positions inside its own
// cache. Each layer's output is put back together in head order. Decode tokens batch per layer and group:
// each group's caches live in a pool of their own (KvPools, tagged by the group's place in the model).
#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"
#include "model/sink.h"
#include "decode/attention/stream_cache.h"

namespace sinklm {
namespace {

// A layer's sink column restricted to `heads` ([n] int64).
SinkColumn column_of_heads(const SinkColumn& sink, const torch::Tensor& heads) {
  if (!sink.present()) return sink;
  SinkColumn part;
  part.logit = sink.logit.index_select(0, heads);
  if (sink.key.defined()) part.key = sink.key.index_select(0, heads);
  if (sink.value.defined()) part.value = sink.value.index_select(0, heads);
  part.normaliser = sink.normaliser;
  return part;
}

struct HeadGroupCache {
  std::unique_ptr<StreamCache> cache;  // one layer over the group's heads
  torch::Tensor heads;                 // [n] int64: the group's heads in the layer, ascending
  int64_t tag = 0;                     // the group's place in the model (its pool's tag)
};

class HeadGroupedStreamCache : public StreamCache {
 public:
  HeadGroupedStreamCache(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, KeyRotation rotation,
                         const ModelConfig& model, torch::Device device)
      : StreamCache(std::move(policy), rule), layers_(model.num_layers) {
    const HeadAwareCache& heads = *policy_->head_aware();
    int64_t tag = 0;
    for (int64_t l = 0; l < model.num_layers; ++l)
      for (const auto& group : heads.groups()) {
        const auto& members = group.heads[l];
        if (members.empty()) continue;
        ModelConfig one = model;  // one layer of the group's heads, each of the model's head size
        one.num_layers = 1;
        one.num_heads = static_cast<int64_t>(members.size());
        one.hidden_size = one.num_heads * model.head_dim();
        auto cache = rotation == KeyRotation::Relative ? make_relative_stream_cache(group.policy, rule, one, device)
                                                       : make_literal_stream_cache(group.policy, rule, one, device);
        layers_[l].push_back({std::move(cache), torch::tensor(members, torch::kInt64).to(device), tag++});
      }
  }

  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SinkColumn& sink) override {
    auto& groups = layers_[layer];
    if (groups.size() == 1) return groups[0].cache->attend(0, q, k, v, sink);  // every head in one group, in order
    torch::Tensor out;  // [H, T, D]
    for (auto& g : groups) {
      auto part = g.cache->attend(0, q.index_select(0, g.heads), k.index_select(0, g.heads),
                                  v.index_select(0, g.heads), column_of_heads(sink, g.heads));  // [n, T, D]
      if (!out.defined()) out = torch::empty({q.size(0), part.size(1), part.size(2)}, part.options());
      out.index_copy_(0, g.heads, part);
    }
    return out;
  }

  void advance(int64_t count) override {
    for_each([&](HeadGroupCache& g) { g.cache->advance(count); });
    stream_length_ += count;
  }

  int64_t max_chunk(int64_t preferred) const override {
    int64_t chunk = preferred;
    for_each([&](const HeadGroupCache& g) { chunk = std::min(chunk, g.cache->max_chunk(preferred)); });
    return chunk;
  }

  // The union of what the heads hold is what the largest group holds.
  int64_t entries() const override { return largest([](const StreamCache& c) { return c.entries(); }); }
  int64_t allocated_entries() const override {
    return largest([](const StreamCache& c) { return c.allocated_entries(); });
  }
  int64_t kv_bytes() const override {
    int64_t bytes = 0;
    for_each([&](const HeadGroupCache& g) { bytes += g.cache->kv_bytes(); });
    return bytes;
  }

  CacheSnapshot snapshot() const override {  // one key and value tensor per layer and group, in that order
    CacheSnapshot s;
    s.stream_length = stream_length_;
    s.format = policy_->kv_format();
    for_each([&](const HeadGroupCache& g) {
      auto part = g.cache->snapshot();
      s.keys.push_back(part.keys[0]);
      s.values.push_back(part.values[0]);
    });
    return s;
  }

  void restore(const CacheSnapshot& s) override {
    size_t i = 0;
    stream_length_ = s.stream_length;
    for_each([&](HeadGroupCache& g) {
      CacheSnapshot part{s.stream_length, {s.keys[i]}, {s.values[i]}, s.format};
      ++i;
      g.cache->restore(part);
    });
  }

  bool adopt_pool(KvPools& pools, int64_t) override {
    bool pooled = true;
    for_each([&](HeadGroupCache& g) { pooled = g.cache->adopt_pool(pools, g.tag) && pooled; });
    return pooled;
  }
  std::pair<const KvPool*, int64_t> pool_page() const override { return layers_[0][0].cache->pool_page(); }

 private:
  friend class HeadGroupedDecodeBatch;
  template <class F>
  void for_each(F f) {
    for (auto& layer : layers_)
      for (auto& g : layer) f(g);
  }
  template <class F>
  void for_each(F f) const {
    for (const auto& layer : layers_)
      for (const auto& g : layer) f(g);
  }
  template <class F>
  int64_t largest(F count) const {
    int64_t n = 0;
    for_each([&](const HeadGroupCache& g) { n = std::max(n, count(*g.cache)); });
    return n;
  }

  std::vector<std::vector<HeadGroupCache>> layers_;  // per layer, its groups in policy order (empty ones left out)
};

// One DecodeBatch per layer and group over the caches of that group: the batch exists when every group's does.
class HeadGroupedDecodeBatch : public DecodeBatch {
 public:
  static std::unique_ptr<DecodeBatch> build(const std::vector<StreamCache*>& caches) {
    std::vector<HeadGroupedStreamCache*> grouped;
    for (auto* cache : caches) {
      auto* c = dynamic_cast<HeadGroupedStreamCache*>(cache);
      if (!c || c->policy().label() != caches[0]->policy().label() ||
          !(c->policy().head_aware()->roles() == caches[0]->policy().head_aware()->roles()))
        return nullptr;
      grouped.push_back(c);
    }
    auto batch = std::make_unique<HeadGroupedDecodeBatch>();
    const auto& layers = grouped[0]->layers_;
    batch->layers_.resize(layers.size());
    for (size_t l = 0; l < layers.size(); ++l)
      for (size_t j = 0; j < layers[l].size(); ++j) {
        std::vector<StreamCache*> members;
        for (auto* c : grouped) members.push_back(c->layers_[l][j].cache.get());
        auto inner = make_relative_decode_batch(members);
        if (!inner) return nullptr;
        batch->layers_[l].push_back({std::move(inner), layers[l][j].heads});
      }
    return batch;
  }

  // q, k, v: [n, H, 1, D]; returns [n, H, 1, D] float32.
  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SinkColumn& sink) override {
    auto& groups = layers_[layer];
    if (groups.size() == 1) return groups[0].batch->attend(0, q, k, v, sink);
    auto out = torch::empty(q.sizes(), q.options().dtype(torch::kFloat32));
    for (auto& g : groups)
      out.index_copy_(1, g.heads,
                      g.batch->attend(0, q.index_select(1, g.heads), k.index_select(1, g.heads),
                                      v.index_select(1, g.heads), column_of_heads(sink, g.heads)));
    return out;
  }

 private:
  struct Group {
    std::unique_ptr<DecodeBatch> batch;
    torch::Tensor heads;  // [n]
  };
  std::vector<std::vector<Group>> layers_;
};

}  // namespace

std::unique_ptr<StreamCache> make_head_grouped_stream_cache(std::shared_ptr<const KvCachePolicy> policy,
                                                            PositionRule rule, KeyRotation rotation,
                                                            const ModelConfig& model, torch::Device device) {
  SINKLM_ASSERT(policy->head_aware(), "a head-grouped cache needs a head-aware policy, got ", policy->name());
  return std::make_unique<HeadGroupedStreamCache>(std::move(policy), rule, rotation, model, device);
}

std::unique_ptr<DecodeBatch> make_head_grouped_decode_batch(const std::vector<StreamCache*>& caches) {
  return HeadGroupedDecodeBatch::build(caches);
}

}  // namespace sinklm
