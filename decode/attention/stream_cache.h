// The KV cache of one stream, for every layer, and the attention of new tokens against it.
//
// Two implementations that tests hold equal:
//  - literal (KeyRotation::Literal): the StreamingLLM reference. Keys are kept before rotary; for every new
//    token the cache evicts per its policy, then rotates the i-th held key at position i (PositionRule::Cache)
//    or at its stream position (PositionRule::Stream), the query likewise, and attends. O(W d) rotation work
//    per token and layer; one token at a time.
//  - relative (KeyRotation::Relative, the fast path): RoPE scores depend only on the distance between query
//    and key. Sink j always sits at position j and a recent key at its stream position s, so both are rotated
//    once, when they enter. The recent run is contiguous and ends at the query, so its distances equal the
//    cache-position distances; a query t is therefore rotated at t for the recent keys and, for the sinks, at
//    its cache position min(t, W-1) (Cache rule) or at t (Stream rule). Extra work per token: one more query
//    rotation and S dot products (O(S d)); no key is ever re-rotated. Chunks of many tokens are exact: each
//    query sees the sinks plus the R most recent tokens up to itself (a banded mask), so a long prompt streams
//    through a small cache exactly as token-by-token decoding would.
// Angles are formed in float64 (RotaryEmbedding), so stream position 10^7 is as exact as 10^3.
#pragma once
#include <torch/types.h>

#include <memory>
#include <vector>

#include "model/model_config.h"
#include "decode/cache/kv_cache_policy.h"
#include "decode/cache/kv_pool.h"
#include "decode/cache/kv_storage.h"

namespace sinklm {

enum class KeyRotation { Relative, Literal };

class StreamCache {
 public:
  virtual ~StreamCache() = default;

  // Layer `layer`'s attention for T new tokens at stream positions [stream_length(), stream_length() + T):
  // q, k, v [H, T, D] before rotary, float32, or bf16 where a bf16 weight's product returned them (a chunk of
  // more rows than the packed decode product takes: model/projection.h); sink: the layer's extra softmax column
  // (model/sink.h). Stores k and v (evicting per the policy) and returns the attention output [H, T, D]. Each
  // layer is called once per chunk, then advance(T).
  virtual torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const SinkColumn& sink) = 0;
  virtual void advance(int64_t count) = 0;
  // The largest chunk the next attend() takes, given the caller's preference.
  virtual int64_t max_chunk(int64_t preferred) const = 0;
  // Entries held now (counted from storage) and storage slots allocated; both <= policy().budget().
  virtual int64_t entries() const = 0;
  virtual int64_t allocated_entries() const = 0;
  // Bytes of K/V storage allocated now, summed over layers (what this stream's cache costs in memory).
  virtual int64_t kv_bytes() const = 0;
  // Contents, keys un-rotated, in cache order; restore with make_stream_cache(..., &snapshot).
  virtual CacheSnapshot snapshot() const = 0;
  // Replaces the contents of a new cache with a snapshot that check_snapshot() accepted.
  virtual void restore(const CacheSnapshot& snapshot) = 0;
  // Moves the contents into a slot of the pool of its shape in `pools` (tag: which pool of that shape) so
  // that decode steps can be batched with other streams (DecodeBatch). False when this cache cannot live
  // there (the literal reference; a policy that does not fill its budget). Idempotent.
  virtual bool adopt_pool(KvPools& pools, int64_t tag = -1) { return false; }
  // The pool and page this cache lives in after adopt_pool, else {nullptr, -1}: decode tokens batch per page.
  virtual std::pair<const KvPool*, int64_t> pool_page() const { return {nullptr, -1}; }

  int64_t stream_length() const { return stream_length_; }
  const KvCachePolicy& policy() const { return *policy_; }
  PositionRule position_rule() const { return rule_; }

 protected:
  StreamCache(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule)
      : policy_(std::move(policy)), rule_(rule) {}
  std::shared_ptr<const KvCachePolicy> policy_;
  PositionRule rule_;
  int64_t stream_length_ = 0;
};

// A stream cache over one KvStorage (decode/cache/kv_storage.h): what every such cache shares, its counts,
// bytes and snapshots in cache order; the cache itself is its attention (decode/attention/*.cpp).
class StoredStreamCache : public StreamCache {
 public:
  int64_t entries() const override { return policy_->entries_after(stream_length_); }
  int64_t allocated_entries() const override { return storage_.allocated_entries(); }
  int64_t kv_bytes() const override { return storage_.bytes(); }
  CacheSnapshot snapshot() const override {
    CacheSnapshot s;
    s.stream_length = stream_length_;
    s.format = policy_->kv_format();
    const auto held = policy_->held_positions(stream_length_);
    for (int64_t l = 0; l < storage_.layers(); ++l) {
      auto [k, v] = storage_.gather(l, held);  // [H, N, D] as attention reads them
      s.keys.push_back(keys_before_rotary(k, held).to(torch::kFloat32).cpu());
      s.values.push_back(v.to(torch::kFloat32).cpu());
    }
    return s;
  }

 protected:
  StoredStreamCache(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, const ModelConfig& model,
                    KvFormat format, torch::Device device)
      : StreamCache(std::move(policy), rule), storage_(*policy_, model, format, device) {}
  // A layer's stored keys [H, N, D] at stream positions `held`, as they were before rotary (identity for a
  // cache that stores them so).
  virtual torch::Tensor keys_before_rotary(const torch::Tensor& keys, const std::vector<int64_t>& held) const {
    return keys;
  }
  KvStorage storage_;
};

// The implementations (decode/attention/relative_stream_cache.cpp, decode/attention/literal_stream_cache.cpp), and for a head-aware
// policy one cache of either kind per layer and head group (decode/attention/head_grouped_stream_cache.cpp): each head
// group's attention is exactly that of its group's policy.
std::unique_ptr<StreamCache> make_relative_stream_cache(std::shared_ptr<const KvCachePolicy> policy,
                                                        PositionRule rule, const ModelConfig& model,
                                                        torch::Device device);
std::unique_ptr<StreamCache> make_literal_stream_cache(std::shared_ptr<const KvCachePolicy> policy,
                                                       PositionRule rule, const ModelConfig& model,
                                                       torch::Device device);
std::unique_ptr<StreamCache> make_head_grouped_stream_cache(std::shared_ptr<const KvCachePolicy> policy,
                                                            PositionRule rule, KeyRotation rotation,
                                                            const ModelConfig& model, torch::Device device);

// One decode token for each of several streams whose caches live in one page of one pool (adopt_pool) and
// share a position rule, or for one stream in its own storage: each layer's attention for all of them in one
// call, reading the caches in place. Built once per decoder step (rotations and masks are shared by the
// layers); equal to calling attend() per cache (tested). Afterwards every cache advance(1)s as usual.
class DecodeBatch {
 public:
  virtual ~DecodeBatch() = default;
  // q, k, v: [n, H, 1, D] before rotary, row i for caches[i]. Stores k, v; returns [n, H, 1, D] float32.
  virtual torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const SinkColumn& sink) = 0;
};
// Null unless every cache is a relative one and, for more than one, every cache is pooled in the same page with
// the same rule and the batch is dense enough (at least half of the slot run it spans decodes now; otherwise
// per-stream attention reads less). Head-grouped caches of one head policy batch when each of their groups does.
std::unique_ptr<DecodeBatch> make_relative_decode_batch(const std::vector<StreamCache*>& caches);
std::unique_ptr<DecodeBatch> make_head_grouped_decode_batch(const std::vector<StreamCache*>& caches);
inline std::unique_ptr<DecodeBatch> make_decode_batch(const std::vector<StreamCache*>& caches) {
  return !caches.empty() && caches[0]->policy().head_aware() ? make_head_grouped_decode_batch(caches)
                                                             : make_relative_decode_batch(caches);
}

// `restore`: contents to start from; its entries are placed at the positions the policy holds after
// restore->stream_length tokens (which may differ from where they were taken).
inline std::unique_ptr<StreamCache> make_stream_cache(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule,
                                                      KeyRotation rotation, const ModelConfig& model,
                                                      torch::Device device, const CacheSnapshot* restore = nullptr) {
  auto cache = policy->head_aware() ? make_head_grouped_stream_cache(std::move(policy), rule, rotation, model, device)
               : rotation == KeyRotation::Relative ? make_relative_stream_cache(std::move(policy), rule, model, device)
                                                   : make_literal_stream_cache(std::move(policy), rule, model, device);
  if (restore) {
    check_snapshot(*restore, cache->policy(), model);
    cache->restore(*restore);
  }
  return cache;
}

}  // namespace sinklm
