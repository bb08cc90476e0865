// The fast path of decode/attention/stream_cache.h: keys rotated once, at the position whose distances stay right.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/attention/rotary.h"
#include "model/io/weight_format.h"
#include "model/sink.h"
#include "decode/cache/kv_storage.h"
#include "decode/attention/chunk_attention.h"
#include "decode/attention/stored_run_attention.h"
#include "decode/attention/stream_cache.h"

namespace sinklm {
namespace {

// What every layer shares for one chunk: rotation tables and the stream position of each held key.
struct ChunkPlan {
  int64_t first = 0, count = 0;   // stream positions [first, first + count)
  torch::Tensor cos, sin;         // [T, R] at the queries' stream positions (also the new keys')
  // [T, R] at the positions the queries take against the sinks under the cache rule; undefined where those are
  // the stream positions (the stream rule, or a chunk that ends before the budget): the queries then rotate once.
  torch::Tensor sink_cos, sink_sin;
  // Stream positions (int64, CPU) of the sinks held [0, S'), the ring slots [capacity] (-1: empty), the chunk [T].
  torch::Tensor sink_positions, ring_positions, chunk_positions;
  WindowVisibility visibility;    // which of them each query sees (the policy's S and R)
  KvWrites writes;                // where the chunk's entries go (decode/cache/kv_storage.h)
};

class RelativeStreamCache : public StoredStreamCache {
 public:
  RelativeStreamCache(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, const ModelConfig& model,
                      torch::Device device)
      // The sinks rotated at 0..S-1, then the ring rotated at stream positions, in the policy's K/V format.
      : StoredStreamCache(policy, rule, model, policy->kv_format(), device),
        rotary_(model.rotary_dims(), model.rotary_base),
        head_dim_(model.head_dim()),
        device_(device) {}

  bool adopt_pool(KvPools& pools, int64_t tag) override {
    if (!policy_->fills_budget()) return false;
    storage_.adopt_pool(pools, tag);
    return true;
  }

  std::pair<const KvPool*, int64_t> pool_page() const override { return {storage_.pool().get(), storage_.slot().page}; }

  void restore(const CacheSnapshot& s) override {
    const auto held = policy_->held_positions(s.stream_length);
    stream_length_ = s.stream_length;
    auto [cos, sin] = rotary_.cos_sin(torch::tensor(held, torch::kInt64).to(device_));  // [N, R]
    for (int64_t l = 0; l < storage_.layers(); ++l)
      storage_.place(l, held, apply_rotary(s.keys[l].to(device_), cos, sin), s.values[l].to(device_));
  }

  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SinkColumn& sink) override {
    const int64_t T = q.size(1);
    if (plan_.count != T || plan_.first != stream_length_) plan_ = make_plan(T);
    const auto& p = plan_;
    // Every entry is what the storage reads back (kv_round_trip: rounded to bf16, or quantised to int8 unless
    // it is a sink kept exact), the queries are rounded as bf16 entries are (int8: kept float32), and the
    // products run in the format's dtype, or in float32 where LibTorch has no native bf16 product
    // (bf16_product_dtype); rotary, the softmax and the sums run in float32.
    const KvFormat format = policy_->kv_format();
    const auto rounded = kv_quantized(format) ? torch::kFloat32 : kv_storage_dtype(format);  // rotated q and k
    const auto dt = rounded == torch::kFloat32 ? rounded : bf16_product_dtype(device_);
    const bool sink_chunk = p.first < policy_->sinks();  // chunks never straddle S
    auto q_recent = rotate_in_float32(q, p.cos, p.sin, rounded).to(dt);  // [H, T, D] at stream positions
    auto k_rotated = rotate_in_float32(k, p.cos, p.sin, rounded);        // [H, T, D]
    auto k_new = kv_round_trip(format, k_rotated, sink_chunk).to(dt);
    auto v_new = kv_round_trip(format, v, sink_chunk).to(dt);
    auto q_sinks = p.sink_cos.defined() ? rotate_in_float32(q, p.sink_cos, p.sink_sin, rounded).to(dt) : q_recent;

    auto [sink_k, sink_v] = storage_.sinks(layer, p.sink_positions.numel());  // [H, S', D]
    auto [ring_k, ring_v] = storage_.ring(layer);                  // [H, capacity, D]
    // [sinks | ring | chunk], who sees what following from the positions (decode/attention/chunk_attention.h).
    auto out = chunk_attention({{q_sinks, sink_k.to(dt), sink_v.to(dt), p.sink_positions},
                                {q_recent, ring_k.to(dt), ring_v.to(dt), p.ring_positions},
                                {q_recent, k_new, v_new, p.chunk_positions}},
                               p.visibility, sink, q_sinks);  // [H, T, D] float32
    storage_.write(layer, p.writes, k_rotated, v);
    return out;
  }

  void advance(int64_t count) override {
    SINKLM_ASSERT(batched_step_ ? count == 1 : plan_.count == count && plan_.first == stream_length_,
                  "advance() must follow attend()");
    stream_length_ += count;
    plan_ = ChunkPlan{};
    batched_step_ = false;
  }

  int64_t max_chunk(int64_t preferred) const override {
    const int64_t S = policy_->sinks();
    return stream_length_ < S ? std::min(preferred, S - stream_length_) : preferred;  // chunks never straddle S
  }

 protected:
  torch::Tensor keys_before_rotary(const torch::Tensor& keys, const std::vector<int64_t>& held) const override {
    auto [cos, sin] = rotary_.cos_sin(torch::tensor(held, torch::kInt64).neg().to(device_));  // undo each rotation
    return apply_rotary(keys.to(torch::kFloat32), cos, sin);
  }

 private:
  ChunkPlan make_plan(int64_t T) const {
    const int64_t n = stream_length_, S = policy_->sinks(), R = policy_->recent_capacity();
    SINKLM_ASSERT(T >= 1 && T <= max_chunk(T), "chunk of ", T, " at ", n, " straddles the sinks");
    policy_->check_append(n, T);
    ChunkPlan p;
    p.first = n;
    p.count = T;
    const auto long_opts = torch::TensorOptions().dtype(torch::kInt64);
    auto query_pos = torch::arange(n, n + T, long_opts);  // [T]
    std::tie(p.cos, p.sin) = rotary_.cos_sin(query_pos.to(device_));
    if (rule_ == PositionRule::Cache && n + T > policy_->budget()) {
      auto cache_pos = query_pos.clamp_max(policy_->budget() - 1);  // = cache_position(t)
      std::tie(p.sink_cos, p.sink_sin) = rotary_.cos_sin(cache_pos.to(device_));
    }

    p.sink_positions = torch::arange(storage_.sinks_held(n), long_opts);
    p.ring_positions = torch::full({storage_.ring_capacity()}, -1, long_opts);
    auto held_recent = torch::arange(n - storage_.ring_count(n), n, long_opts);
    p.ring_positions.index_put_({storage_.ring_slots_of(held_recent)}, held_recent);
    p.chunk_positions = query_pos;
    p.visibility = {n, S, R};
    p.writes = storage_.plan_writes(n, T);
    return p;
  }

  friend class RelativeDecodeBatch;
  RotaryEmbedding rotary_;
  int64_t head_dim_;
  torch::Device device_;
  ChunkPlan plan_;
  bool batched_step_ = false;  // this step's attention ran in a RelativeDecodeBatch
};

// DecodeBatch over relative caches. It reads a run of rows of the slot layout, [m, H, S + capacity, D]:
// consecutive slots of one pool page, or a lone cache's own storage (a run of one). The new key is stored
// before attending: a decoding token at t sees the sinks 0..min(S, t+1)-1 and the ring, which after the store
// holds exactly the R most recent positions up to t (the entry it overwrites, t - R, is one the query must not
// see). Under the cache rule past W - 1 the query takes two positions: t against the ring, W - 1 against the
// sinks (and against a sink column's key); both rotations come from one product, and the two score blocks
// are softmaxed together. Every product
// has one query row per stream and head; decode/attention/stored_run_attention.h runs them and the store.
class RelativeDecodeBatch : public DecodeBatch {
 public:
  // Null unless the caches are relative and, when more than one, form a dense batch of one pool page.
  static std::unique_ptr<DecodeBatch> build(const std::vector<StreamCache*>& caches) {
    std::vector<RelativeStreamCache*> relative;
    for (auto* cache : caches) {
      auto* c = dynamic_cast<RelativeStreamCache*>(cache);
      if (!c || (caches.size() > 1 && !c->storage_.pool())) return nullptr;
      relative.push_back(c);
    }
    if (relative.empty()) return nullptr;
    const auto* first = relative[0];
    const auto& pool = first->storage_.pool();
    const KvPool::Slot& slot = first->storage_.slot();
    int64_t lo = slot.index, hi = slot.index;
    for (const auto* c : relative) {
      if (c->storage_.pool() != pool || c->storage_.slot().page != slot.page || c->rule_ != first->rule_) return nullptr;
      lo = std::min(lo, c->storage_.slot().index);
      hi = std::max(hi, c->storage_.slot().index);
    }
    const int64_t span = hi - lo + 1;
    if (2 * static_cast<int64_t>(relative.size()) < span) return nullptr;  // mostly idle slots: per stream reads less
    return std::make_unique<RelativeDecodeBatch>(std::move(relative), lo, span);
  }

  RelativeDecodeBatch(std::vector<RelativeStreamCache*> caches, int64_t first_slot, int64_t slots)
      : caches_(std::move(caches)), first_slot_(first_slot), slots_(slots) {
    auto* c0 = caches_[0];
    const int64_t S = c0->policy_->sinks(), R = c0->policy_->recent_capacity(), D = c0->head_dim_;
    auto& storage = c0->storage_;
    if (!storage.pool())  // a lone cache's ring grows to hold this token before the layers store it
      for (int64_t l = 0; l < storage.layers(); ++l)
        storage.grow_ring(l, c0->stream_length_ < S ? 0 : std::min(R, c0->stream_length_ - S + 1));
    const int64_t width = S + storage.ring_capacity();
    const auto long_opts = torch::TensorOptions().dtype(torch::kInt64);
    std::vector<int64_t> row, column, position, sink_limit(slots_, S > 0 ? 1 : 0),
        ring_count(slots_, S > 0 ? 0 : 1);  // idle rows see one entry, so their (dropped) softmax is finite
    int64_t latest = 0;
    for (auto* c : caches_) {
      const int64_t t = c->stream_length_, r = c->storage_.pool() ? c->storage_.slot().index - first_slot_ : 0;
      dense_ = dense_ && r == static_cast<int64_t>(row.size());
      row.push_back(r);
      column.push_back(t < S ? t : S + (t - S) % R);
      position.push_back(t);
      sink_limit[r] = std::min(S, t + 1);
      ring_count[r] = t < S ? 0 : std::min(R, t - S + 1);
      latest = std::max(latest, t);
      c->batched_step_ = true;
    }
    dense_ = dense_ && slots_ == static_cast<int64_t>(caches_.size());
    const auto device = c0->device_;
    rows_ = torch::tensor(row, long_opts).to(device);
    columns_ = torch::tensor(column, long_opts).to(device);

    // Rotations as [n, D, D] products; the queries' also carry the 1/sqrt(D) score scale.
    auto t = torch::tensor(position, long_opts);  // [n]
    auto [cos, sin] = c0->rotary_.cos_sin(t);
    auto at_t = rotary_matrix(cos, sin, D);
    key_rotation_ = at_t.to(device);
    const int64_t W = S + R;
    // Without sinks the second row still serves a sink column's key (softmax_with_sink in attend()).
    queries_ = c0->rule_ == PositionRule::Cache && latest >= W - 1 ? 2 : 1;
    torch::Tensor query = at_t;
    if (queries_ == 2) {
      std::tie(cos, sin) = c0->rotary_.cos_sin(t.clamp_max(W - 1));
      query = torch::cat({at_t, rotary_matrix(cos, sin, D)}, -1);  // [n, D, 2D]: row 0 at t, row 1 at the sinks' position
    }
    query_rotation_ = (query / std::sqrt(static_cast<double>(D))).to(device);

    // [m, 1, 1, S + capacity]: 0 where visible, -inf where hidden (entries not yet written, idle rows).
    auto col = torch::arange(width, long_opts).unsqueeze(0);                                     // [1, width]
    auto limit = torch::where(col < S, torch::tensor(sink_limit, long_opts).unsqueeze(1),        // [m, width]
                              torch::tensor(ring_count, long_opts).unsqueeze(1) + S);
    const auto hidden = col >= limit;  // [m, width]
    if (hidden.any().item<bool>())    // in steady decoding every ring is full and every entry visible: no mask
      bias_ = torch::zeros({slots_, width}, torch::kFloat32)
                  .masked_fill(hidden, -std::numeric_limits<float>::infinity())
                  .view({slots_, 1, 1, width})
                  .to(device);
  }

  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SinkColumn& sink) override {
    const auto* c0 = caches_[0];
    const auto& storage = c0->storage_;
    const auto& pool = storage.pool();
    // [m, H, S + capacity, D] (decode/cache/kv_pool.h)
    const KvLayer run = pool ? pool->layer(storage.slot().page, layer).narrow(first_slot_, slots_) : storage.layer(layer).unsqueeze();
    const int64_t n = q.size(0), H = q.size(1), D = q.size(3), m = run.keys.size(0), S = c0->policy_->sinks();
    store_decode_entries(storage.format(), run, rows_, columns_, S, torch::bmm(k.squeeze(2), key_rotation_), v.squeeze(2));
    auto queries = torch::bmm(q.squeeze(2), query_rotation_).view({n, H, queries_, D});  // [n, H, r, D]
    if (!dense_) queries = torch::zeros({m, H, queries_, D}, queries.options()).index_copy_(0, rows_, queries);
    auto scores = stored_key_scores(storage.format(), run, queries, S);  // [m, H, 1, width] float32
    if (bias_.defined()) scores.add_(bias_);
    // A sink column's key meets the query rotation of the sinks' position (the last row), unscaled.
    const auto column_query =
        sink.key.defined() ? queries.narrow(2, queries_ - 1, 1) * std::sqrt(static_cast<double>(D)) : torch::Tensor();
    auto probs = softmax_with_sink(scores, sink, column_query);  // [m, H, 1, width]
    auto out = stored_value_mix(storage.format(), run, probs, S);  // [m, H, 1, D] float32
    if (auto from_sink = sink_value_output(probs, sink); from_sink.defined()) out = out + from_sink;
    return dense_ ? out : out.index_select(0, rows_);  // [n, H, 1, D]
  }

 private:
  std::vector<RelativeStreamCache*> caches_;
  int64_t first_slot_, slots_;       // the run of page slots [first_slot_, first_slot_ + slots_) attended
  bool dense_ = true;                // cache i is row i of the run, and every row decodes
  int64_t queries_ = 1;              // query rotations per token (r): 2 when sinks and ring take different positions
  torch::Tensor rows_, columns_;     // [n]: row in the run, cache column the new entry takes
  torch::Tensor key_rotation_;       // [n, D, D] at t
  torch::Tensor query_rotation_;     // [n, D, r D], scaled
  torch::Tensor bias_;               // [m, 1, 1, S + capacity], undefined when nothing is hidden
};

}  // namespace

std::unique_ptr<DecodeBatch> make_relative_decode_batch(const std::vector<StreamCache*>& caches) {
  return RelativeDecodeBatch::build(caches);
}

std::unique_ptr<StreamCache> make_relative_stream_cache(std::shared_ptr<const KvCachePolicy> policy,
                                                        PositionRule rule, const ModelConfig& model,
                                                        torch::Device device) {
  return std::make_unique<RelativeStreamCache>(std::move(policy), rule, model, device);
}

}  // namespace sinklm
