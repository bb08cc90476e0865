// The fast path of serve/stream_cache.h: keys rotated once, at the position whose distances stay right.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/rotary.h"
#include "model/sink.h"
#include "serve/stream_cache.h"

namespace sinklm {
namespace {

// What every layer shares for one chunk: rotation tables and the visibility of each held key.
struct ChunkPlan {
  int64_t first = 0, count = 0;   // stream positions [first, first + count)
  torch::Tensor cos, sin;         // [T, R] at the queries' stream positions (also the new keys')
  torch::Tensor sink_cos, sink_sin;  // [T, R] at the positions the queries take against the sinks
  torch::Tensor bias;             // [T, sinks_held + ring_capacity + T]: 0 where visible, -inf elsewhere
  int64_t sinks_held = 0, ring_capacity = 0;
  torch::Tensor ring_slots;       // [m] slots the chunk's last m recent entries are written to
  int64_t ring_source = 0;        // index in the chunk of the first of those m entries
  int64_t ring_capacity_after = 0;
};

class RelativeStreamCache : public StreamCache {
 public:
  RelativeStreamCache(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, const ModelConfig& model,
                      torch::Device device)
      : StreamCache(std::move(policy), rule),
        rotary_(model.rotary_dims(), model.rotary_base),
        heads_(model.num_heads),
        head_dim_(model.head_dim()),
        device_(device),
        sink_k_(model.num_layers), sink_v_(model.num_layers), ring_k_(model.num_layers), ring_v_(model.num_layers) {
    const auto opts = torch::TensorOptions().dtype(policy_->kv_dtype()).device(device_);
    for (int64_t l = 0; l < model.num_layers; ++l) {
      sink_k_[l] = torch::zeros({heads_, policy_->sinks(), head_dim_}, opts);  // [H, S, D], rotated at 0..S-1
      sink_v_[l] = torch::zeros({heads_, policy_->sinks(), head_dim_}, opts);
      ring_k_[l] = torch::zeros({heads_, 0, head_dim_}, opts);  // [H, capacity, D], rotated at stream positions
      ring_v_[l] = torch::zeros({heads_, 0, head_dim_}, opts);
    }
  }

  ~RelativeStreamCache() override {
    if (pool_) pool_->release(slot_);
  }

  bool adopt_pool(const std::shared_ptr<KvPool>& pool) override {
    if (pool_) return pool_ == pool;
    if (!policy_->fills_budget() || pool->sinks() != policy_->sinks() || pool->recent() != policy_->recent_capacity() ||
        pool->dtype() != kv_dtype())
      return false;
    const int64_t S = policy_->sinks(), R = policy_->recent_capacity();
    slot_ = pool->acquire();
    pool_ = pool;
    for (size_t l = 0; l < sink_k_.size(); ++l) {
      auto keys = pool->keys(slot_.page, l)[slot_.index], values = pool->values(slot_.page, l)[slot_.index];  // [H, S+R, D]
      // Until the ring first fills, entry p sits in ring slot p - S < capacity: the prefix copies as is.
      keys.narrow(1, 0, S).copy_(sink_k_[l]);
      values.narrow(1, 0, S).copy_(sink_v_[l]);
      keys.narrow(1, S, ring_k_[l].size(1)).copy_(ring_k_[l]);
      values.narrow(1, S, ring_v_[l].size(1)).copy_(ring_v_[l]);
      sink_k_[l] = keys.narrow(1, 0, S);
      sink_v_[l] = values.narrow(1, 0, S);
      ring_k_[l] = keys.narrow(1, S, R);
      ring_v_[l] = values.narrow(1, S, R);
    }
    return true;
  }

  std::pair<const KvPool*, int64_t> pool_page() const override { return {pool_.get(), slot_.page}; }

  void restore(const CacheSnapshot& s) override {
    const auto held = policy_->held_positions(s.stream_length);
    const int64_t S = policy_->sinks(), sinks_held = std::min(S, s.stream_length);
    stream_length_ = s.stream_length;
    auto [cos, sin] = rotary_.cos_sin(torch::tensor(held, torch::kInt64).to(device_));  // [N, R]
    const int64_t recent = static_cast<int64_t>(held.size()) - sinks_held;
    std::vector<int64_t> slots;
    for (int64_t i = sinks_held; i < static_cast<int64_t>(held.size()); ++i) slots.push_back(ring_slot(held[i]));
    auto slot_index = torch::tensor(slots, torch::kInt64).to(device_);
    for (size_t l = 0; l < sink_k_.size(); ++l) {
      auto k = apply_rotary(s.keys[l].to(device_), cos, sin).to(kv_dtype()), v = s.values[l].to(device_, kv_dtype());
      sink_k_[l].narrow(1, 0, sinks_held).copy_(k.narrow(1, 0, sinks_held));
      sink_v_[l].narrow(1, 0, sinks_held).copy_(v.narrow(1, 0, sinks_held));
      grow_ring(l, recent);
      ring_k_[l].index_copy_(1, slot_index, k.narrow(1, sinks_held, recent));
      ring_v_[l].index_copy_(1, slot_index, v.narrow(1, sinks_held, recent));
    }
  }

  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& sink_logit) override {
    const int64_t T = q.size(1);
    if (plan_.count != T || plan_.first != stream_length_) plan_ = make_plan(T);
    const auto& p = plan_;
    // Products run in the storage dtype (a no-op for float32), the softmax and the sums in float32.
    const auto dt = kv_dtype();
    auto q_recent = apply_rotary(q, p.cos, p.sin).to(dt);  // [H, T, D] at stream positions
    auto k_new = apply_rotary(k, p.cos, p.sin).to(dt);     // [H, T, D]
    auto v_new = v.to(dt);
    auto q_sinks = rule_ == PositionRule::Cache ? apply_rotary(q, p.sink_cos, p.sink_sin).to(dt) : q_recent;

    auto sink_k = sink_k_[layer].narrow(1, 0, p.sinks_held), sink_v = sink_v_[layer].narrow(1, 0, p.sinks_held);
    auto scores = torch::cat({torch::matmul(q_sinks, sink_k.transpose(1, 2)),            // [H, T, sinks_held]
                              torch::matmul(q_recent, ring_k_[layer].transpose(1, 2)),   // [H, T, capacity]
                              torch::matmul(q_recent, k_new.transpose(1, 2))}, -1);      // [H, T, T]
    scores = scores.to(torch::kFloat32) / std::sqrt(static_cast<double>(head_dim_)) + p.bias;
    auto probs = softmax_with_sink(scores, sink_logit).to(dt);  // [H, T, sinks_held + capacity + T]
    // probs · [sink_v; ring_v; v] without concatenating the stored values (a copy of the whole cache).
    const int64_t capacity = ring_v_[layer].size(1);
    auto out = torch::matmul(probs.narrow(-1, p.sinks_held + capacity, T), v_new).to(torch::kFloat32);  // [H, T, D]
    if (p.sinks_held > 0) out = out + torch::matmul(probs.narrow(-1, 0, p.sinks_held), sink_v).to(torch::kFloat32);
    if (capacity > 0)
      out = out + torch::matmul(probs.narrow(-1, p.sinks_held, capacity), ring_v_[layer]).to(torch::kFloat32);
    store(layer, k_new, v_new);
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

  int64_t entries() const override { return sinks_held() + ring_count(); }
  int64_t allocated_entries() const override { return sink_k_[0].size(1) + ring_k_[0].size(1); }

  CacheSnapshot snapshot() const override {
    CacheSnapshot s;
    s.stream_length = stream_length_;
    const auto held = policy_->held_positions(stream_length_);
    const int64_t sinks = sinks_held();
    std::vector<int64_t> slots;
    for (size_t i = sinks; i < held.size(); ++i) slots.push_back(ring_slot(held[i]));
    auto slot_index = torch::tensor(slots, torch::kInt64).to(device_);
    auto negative = torch::tensor(held, torch::kInt64).neg().to(device_);
    auto [cos, sin] = rotary_.cos_sin(negative);  // undo each key's rotation
    for (size_t l = 0; l < sink_k_.size(); ++l) {
      auto k = torch::cat({sink_k_[l].narrow(1, 0, sinks), ring_k_[l].index_select(1, slot_index)}, 1);
      auto v = torch::cat({sink_v_[l].narrow(1, 0, sinks), ring_v_[l].index_select(1, slot_index)}, 1);
      s.keys.push_back(apply_rotary(k.to(torch::kFloat32), cos, sin).cpu());
      s.values.push_back(v.to(torch::kFloat32).cpu());
    }
    return s;
  }

 private:
  int64_t sinks_held() const { return std::min(policy_->sinks(), stream_length_); }
  torch::ScalarType kv_dtype() const { return policy_->kv_dtype(); }
  int64_t ring_count() const { return std::min(policy_->recent_capacity(), stream_length_ - sinks_held()); }
  // Recent entry at stream position p (>= S) lives in slot (p - S) mod R; until the ring first fills, that is
  // p - S, so the storage can grow by copying.
  int64_t ring_slot(int64_t p) const { return (p - policy_->sinks()) % policy_->recent_capacity(); }
  torch::Tensor ring_slots_of(const torch::Tensor& positions) const {
    return (positions - policy_->sinks()).remainder(policy_->recent_capacity());
  }

  void grow_ring(size_t layer, int64_t needed) {
    const int64_t capacity = ring_k_[layer].size(1);
    if (needed <= capacity) return;
    const int64_t grown = std::min(policy_->recent_capacity(), std::max({needed, 2 * capacity, int64_t{16}}));
    for (auto* ring : {&ring_k_[layer], &ring_v_[layer]}) {
      auto bigger = torch::zeros({heads_, grown, head_dim_}, ring->options());
      bigger.narrow(1, 0, capacity).copy_(*ring);
      *ring = bigger;
    }
  }

  ChunkPlan make_plan(int64_t T) const {
    const int64_t n = stream_length_, S = policy_->sinks(), R = policy_->recent_capacity();
    SINKLM_ASSERT(T >= 1 && T <= max_chunk(T), "chunk of ", T, " at ", n, " straddles the sinks");
    policy_->check_append(n, T);
    ChunkPlan p;
    p.first = n;
    p.count = T;
    p.sinks_held = sinks_held();
    p.ring_capacity = ring_k_[0].size(1);
    const auto long_opts = torch::TensorOptions().dtype(torch::kInt64);
    auto query_pos = torch::arange(n, n + T, long_opts);  // [T]
    std::tie(p.cos, p.sin) = rotary_.cos_sin(query_pos.to(device_));
    auto cache_pos = query_pos.clamp_max(policy_->budget() - 1);  // = cache_position(t)
    std::tie(p.sink_cos, p.sink_sin) = rotary_.cos_sin(cache_pos.to(device_));

    // Stream position of each key column: sinks, ring slots (-1 = empty), the chunk.
    auto ring_pos = torch::full({p.ring_capacity}, -1, long_opts);
    auto held_recent = torch::arange(n - ring_count(), n, long_opts);
    ring_pos.index_put_({ring_slots_of(held_recent)}, held_recent);
    auto t = query_pos.unsqueeze(1);  // [T, 1]
    auto ring_visible = ring_pos.ge(0).unsqueeze(0) & ring_pos.unsqueeze(0).gt(t - R);            // [T, cap]
    auto chunk_pos = query_pos.unsqueeze(0);                                                       // [1, T]
    auto chunk_visible = chunk_pos.le(t) & (chunk_pos.lt(S) | chunk_pos.gt(t - R));               // [T, T]
    auto visible = torch::cat({torch::ones({T, p.sinks_held}, torch::kBool), ring_visible, chunk_visible}, 1);
    p.bias = torch::zeros(visible.sizes(), torch::kFloat32)
                 .masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity())
                 .to(device_);

    // Writes: sinks go to their own slots; of the recent entries only the last R survive the chunk.
    const int64_t first_recent = std::max(n, S), end = n + T;
    const int64_t m = std::min(std::max<int64_t>(end - first_recent, 0), R);
    p.ring_slots = ring_slots_of(torch::arange(end - m, end, long_opts)).to(device_);
    p.ring_source = T - m;
    p.ring_capacity_after = std::min(R, std::max<int64_t>(end - S, 0));
    return p;
  }

  void store(int64_t layer, const torch::Tensor& k_new, const torch::Tensor& v) {
    const auto& p = plan_;
    const int64_t S = policy_->sinks();
    if (p.first < S) {  // the whole chunk is sinks (chunks never straddle S)
      sink_k_[layer].narrow(1, p.first, p.count).copy_(k_new);
      sink_v_[layer].narrow(1, p.first, p.count).copy_(v);
      return;
    }
    grow_ring(layer, p.ring_capacity_after);
    const int64_t m = p.ring_slots.size(0);
    ring_k_[layer].index_copy_(1, p.ring_slots, k_new.narrow(1, p.ring_source, m));
    ring_v_[layer].index_copy_(1, p.ring_slots, v.narrow(1, p.ring_source, m));
  }

  friend class RelativeDecodeBatch;
  RotaryEmbedding rotary_;
  int64_t heads_, head_dim_;
  torch::Device device_;
  std::vector<torch::Tensor> sink_k_, sink_v_, ring_k_, ring_v_;  // per layer; views into the pool once pooled
  ChunkPlan plan_;
  std::shared_ptr<KvPool> pool_;  // set by adopt_pool
  KvPool::Slot slot_;
  bool batched_step_ = false;  // this step's attention ran in a RelativeDecodeBatch
};

// PooledDecodeBatch over relative caches. The new key is stored before attending: a decoding token at t
// sees the sinks 0..min(S, t+1)-1 and the ring, which after the store holds exactly the R most recent
// positions up to t (the entry it overwrites, t - R, is one the query must not see).
class RelativeDecodeBatch : public PooledDecodeBatch {
 public:
  // Null unless the caches form a dense batch of one pool page (see make_pooled_decode_batch).
  static std::unique_ptr<PooledDecodeBatch> build(const std::vector<StreamCache*>& caches) {
    if (caches.size() < 2) return nullptr;
    std::vector<RelativeStreamCache*> relative;
    for (auto* cache : caches) {
      auto* c = dynamic_cast<RelativeStreamCache*>(cache);
      if (!c || !c->pool_) return nullptr;
      relative.push_back(c);
    }
    const auto* first = relative[0];
    int64_t lo = INT64_MAX, hi = -1;
    for (const auto* c : relative) {
      if (c->pool_ != first->pool_ || c->slot_.page != first->slot_.page || c->rule_ != first->rule_) return nullptr;
      lo = std::min(lo, c->slot_.index);
      hi = std::max(hi, c->slot_.index);
    }
    const int64_t span = hi - lo + 1;
    if (2 * static_cast<int64_t>(relative.size()) < span) return nullptr;  // mostly idle slots: per stream reads less
    return std::make_unique<RelativeDecodeBatch>(std::move(relative), lo, span);
  }

  RelativeDecodeBatch(std::vector<RelativeStreamCache*> caches, int64_t first_slot, int64_t slots)
      : caches_(std::move(caches)), first_slot_(first_slot), slots_(slots) {
    const auto* c0 = caches_[0];
    const int64_t S = c0->policy_->sinks(), R = c0->policy_->recent_capacity(), W = S + R;
    const auto long_opts = torch::TensorOptions().dtype(torch::kInt64);
    std::vector<int64_t> local, slot, column, position(slots_, 0), sink_limit(slots_, S > 0 ? 1 : 0),
        ring_count(slots_, S > 0 ? 0 : 1);  // idle rows see one entry, so their (dropped) softmax is finite
    for (auto* c : caches_) {
      const int64_t t = c->stream_length_, row = c->slot_.index - first_slot_;
      local.push_back(row);
      slot.push_back(c->slot_.index);
      column.push_back(t < S ? t : S + (t - S) % R);
      position[row] = t;
      sink_limit[row] = std::min(S, t + 1);
      ring_count[row] = t < S ? 0 : std::min(R, t - S + 1);
      c->batched_step_ = true;
    }
    const auto device = c0->device_;
    local_ = torch::tensor(local, long_opts).to(device);
    slot_ = torch::tensor(slot, long_opts).to(device);
    column_ = torch::tensor(column, long_opts).to(device);
    auto t = torch::tensor(position, long_opts);  // [m]
    std::tie(cos_, sin_) = c0->rotary_.cos_sin(t.unsqueeze(1).to(device));  // [m, 1, R_rot]
    cos_new_ = cos_.index_select(0, local_);
    sin_new_ = sin_.index_select(0, local_);
    same_query_ = c0->rule_ == PositionRule::Stream || t.max().item<int64_t>() < W - 1;
    if (!same_query_) std::tie(sink_cos_, sink_sin_) = c0->rotary_.cos_sin(t.clamp_max(W - 1).unsqueeze(1).to(device));
    // [m, 1, 1, S+R]: 0 where visible, -inf elsewhere.
    auto col = torch::arange(W, long_opts).unsqueeze(0);                                       // [1, S+R]
    auto limit = torch::where(col < S, torch::tensor(sink_limit, long_opts).unsqueeze(1),       // [m, S+R]
                              torch::tensor(ring_count, long_opts).unsqueeze(1) + S);
    bias_ = torch::zeros({slots_, W}, torch::kFloat32)
                .masked_fill(col >= limit, -std::numeric_limits<float>::infinity())
                .view({slots_, 1, 1, W})
                .to(device);
  }

  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& sink_logit) override {
    const auto* c0 = caches_[0];
    const int64_t S = c0->policy_->sinks(), D = c0->head_dim_;
    auto& pool = *c0->pool_;
    const int64_t page = c0->slot_.page;
    auto keys = pool.keys(page, layer), values = pool.values(page, layer);  // [P, H, S+R, D]
    using torch::indexing::Slice;
    const auto dt = keys.scalar_type();  // products in the storage dtype, softmax in float32
    keys.index_put_({slot_, Slice(), column_}, apply_rotary(k, cos_new_, sin_new_).squeeze(2).to(dt));  // [n, H, D]
    values.index_put_({slot_, Slice(), column_}, v.squeeze(2).to(dt));
    auto run_k = keys.narrow(0, first_slot_, slots_), run_v = values.narrow(0, first_slot_, slots_);  // [m, H, S+R, D]
    auto q_rows = torch::zeros({slots_, q.size(1), 1, D}, q.options()).index_copy_(0, local_, q);      // [m, H, 1, D]
    auto q_recent = apply_rotary(q_rows, cos_, sin_).to(dt);
    torch::Tensor scores;  // [m, H, 1, S+R]
    if (same_query_) {
      scores = torch::matmul(q_recent, run_k.transpose(2, 3));
    } else {
      auto q_sinks = apply_rotary(q_rows, sink_cos_, sink_sin_).to(dt);
      scores = torch::cat({torch::matmul(q_sinks, run_k.narrow(2, 0, S).transpose(2, 3)),
                           torch::matmul(q_recent, run_k.narrow(2, S, run_k.size(2) - S).transpose(2, 3))}, -1);
    }
    auto probs = softmax_with_sink(scores.to(torch::kFloat32) / std::sqrt(static_cast<double>(D)) + bias_, sink_logit);
    return torch::matmul(probs.to(dt), run_v).index_select(0, local_).to(torch::kFloat32);  // [n, H, 1, D]
  }

 private:
  std::vector<RelativeStreamCache*> caches_;
  int64_t first_slot_, slots_;        // the run of page slots [first_slot_, first_slot_ + slots_) attended
  torch::Tensor local_, slot_, column_;  // [n]: row in the run, page slot, cache column the new entry takes
  torch::Tensor cos_, sin_, cos_new_, sin_new_, sink_cos_, sink_sin_, bias_;
  bool same_query_ = true;  // the sink columns take the query at the same position as the recent ones
};

}  // namespace

std::unique_ptr<PooledDecodeBatch> make_pooled_decode_batch(const std::vector<StreamCache*>& caches) {
  return RelativeDecodeBatch::build(caches);
}

std::unique_ptr<StreamCache> make_relative_stream_cache(std::shared_ptr<const KvCachePolicy> policy,
                                                        PositionRule rule, const ModelConfig& model,
                                                        torch::Device device) {
  return std::make_unique<RelativeStreamCache>(std::move(policy), rule, model, device);
}

}  // namespace sinklm
