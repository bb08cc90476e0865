#include "decode/cache/kv_storage.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"

namespace sinklm {

KvStorage::KvStorage(const KvCachePolicy& policy, const ModelConfig& model, torch::ScalarType dtype, torch::Device device)
    : sinks_(policy.sinks()),
      recent_(policy.recent_capacity()),
      heads_(model.num_heads),
      head_dim_(model.head_dim()),
      device_(device),
      keys_(model.num_layers),
      values_(model.num_layers) {
  const auto opts = torch::TensorOptions().dtype(dtype).device(device);
  for (int64_t l = 0; l < model.num_layers; ++l) {
    keys_[l] = kv_keys_zeros({heads_, sinks_, head_dim_}, opts);  // the ring starts empty
    values_[l] = torch::zeros({heads_, sinks_, head_dim_}, opts);
  }
}

KvStorage::~KvStorage() {
  if (pool_) pool_->release(slot_);
}

void KvStorage::grow_ring(int64_t layer, int64_t needed) {
  const int64_t capacity = keys_[layer].size(1) - sinks_;
  if (needed <= capacity) return;
  const int64_t grown = std::min(recent_, std::max({needed, 2 * capacity, int64_t{16}}));
  auto keys = kv_keys_zeros({heads_, sinks_ + grown, head_dim_}, keys_[layer].options());
  auto values = torch::zeros({heads_, sinks_ + grown, head_dim_}, values_[layer].options());
  keys.narrow(1, 0, sinks_ + capacity).copy_(keys_[layer]);
  values.narrow(1, 0, sinks_ + capacity).copy_(values_[layer]);
  keys_[layer] = keys;
  values_[layer] = values;
}

KvWrites KvStorage::plan_writes(int64_t first, int64_t count) const {
  // Sinks go to their own slots; of the recent entries only the last R survive the chunk.
  KvWrites w;
  w.first = first;
  w.count = count;
  const int64_t first_recent = std::max(first, sinks_), end = first + count;
  const int64_t m = std::min(std::max<int64_t>(end - first_recent, 0), recent_);
  w.ring_slots = ring_slots_of(torch::arange(end - m, end, torch::kInt64)).to(device_);
  w.ring_source = count - m;
  w.ring_capacity_after = std::min(recent_, std::max<int64_t>(end - sinks_, 0));
  return w;
}

void KvStorage::write(int64_t layer, const KvWrites& w, const torch::Tensor& k, const torch::Tensor& v) {
  if (w.first < sinks_) {  // the whole chunk is sinks (chunks never straddle S)
    SINKLM_ASSERT(w.first + w.count <= sinks_, "chunk ", w.first, "+", w.count, " straddles ", sinks_, " sinks");
    keys_[layer].narrow(1, w.first, w.count).copy_(k);
    values_[layer].narrow(1, w.first, w.count).copy_(v);
    return;
  }
  grow_ring(layer, w.ring_capacity_after);
  const int64_t m = w.ring_slots.size(0);
  ring(keys_[layer]).index_copy_(1, w.ring_slots, k.narrow(1, w.ring_source, m));
  ring(values_[layer]).index_copy_(1, w.ring_slots, v.narrow(1, w.ring_source, m));
}

torch::Tensor KvStorage::slot_index(const std::vector<int64_t>& held, int64_t sinks_held) const {
  std::vector<int64_t> slots;
  for (size_t i = sinks_held; i < held.size(); ++i) slots.push_back(ring_slot(held[i]));
  return torch::tensor(slots, torch::kInt64).to(device_);
}

std::pair<torch::Tensor, torch::Tensor> KvStorage::gather(int64_t layer, const std::vector<int64_t>& held) const {
  const int64_t sinks = std::min<int64_t>(sinks_, static_cast<int64_t>(held.size()));
  const auto slots = slot_index(held, sinks);
  return {torch::cat({keys_[layer].narrow(1, 0, sinks), ring(keys_[layer]).index_select(1, slots)}, 1),
          torch::cat({values_[layer].narrow(1, 0, sinks), ring(values_[layer]).index_select(1, slots)}, 1)};
}

void KvStorage::place(int64_t layer, const std::vector<int64_t>& held, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t sinks = std::min<int64_t>(sinks_, static_cast<int64_t>(held.size()));
  const int64_t recent = static_cast<int64_t>(held.size()) - sinks;
  keys_[layer].narrow(1, 0, sinks).copy_(k.narrow(1, 0, sinks));
  values_[layer].narrow(1, 0, sinks).copy_(v.narrow(1, 0, sinks));
  grow_ring(layer, recent);
  const auto slots = slot_index(held, sinks);
  ring(keys_[layer]).index_copy_(1, slots, k.narrow(1, sinks, recent));
  ring(values_[layer]).index_copy_(1, slots, v.narrow(1, sinks, recent));
}

void KvStorage::adopt_pool(KvPools& pools, int64_t tag) {
  if (pool_) return;
  auto pool = pools.get(layers(), heads_, sinks_, recent_, head_dim_, dtype(), tag);
  slot_ = pool->acquire();
  pool_ = pool;
  for (int64_t l = 0; l < layers(); ++l) {
    auto keys = pool->keys(slot_.page, l)[slot_.index], values = pool->values(slot_.page, l)[slot_.index];  // [H, S+R, D]
    // Same layout; until the ring first fills, entry p sits in ring slot p - S < capacity: the prefix copies as is.
    keys.narrow(1, 0, keys_[l].size(1)).copy_(keys_[l]);
    values.narrow(1, 0, values_[l].size(1)).copy_(values_[l]);
    keys_[l] = keys;
    values_[l] = values;
  }
}

void check_snapshot(const CacheSnapshot& s, const KvCachePolicy& policy, const ModelConfig& model) {
  const auto shapes = policy.snapshot_shapes(s.stream_length, model);
  if (s.keys.size() != shapes.size() || s.values.size() != s.keys.size())
    fail("cache snapshot has ", s.keys.size(), " key tensors, a ", policy.name(), " ", policy.label(), " cache of this model has ",
         shapes.size());
  for (size_t i = 0; i < s.keys.size(); ++i)
    if (s.keys[i].sizes() != shapes[i] || s.values[i].sizes() != shapes[i])
      fail("cache snapshot tensor ", i, ": keys ", s.keys[i].sizes(), " / values ", s.values[i].sizes(), ", expected ",
           c10::IntArrayRef(shapes[i]), " for a ", policy.name(), " ", policy.label(), " cache after ", s.stream_length,
           " tokens");
}

}  // namespace sinklm
