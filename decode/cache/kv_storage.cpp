#include "decode/cache/kv_storage.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"

namespace sinklm {

KvStorage::KvStorage(const KvCachePolicy& policy, const ModelConfig& model, KvFormat format, torch::Device device)
    : sinks_(policy.sinks()),
      recent_(policy.recent_capacity()),
      heads_(model.num_heads),
      head_dim_(model.head_dim()),
      format_(format),
      device_(device) {
  for (int64_t l = 0; l < model.num_layers; ++l)  // the ring starts empty
    layers_.push_back(KvLayer::zeros(format_, {}, heads_, sinks_, sinks_, head_dim_, device_));
}

KvStorage::~KvStorage() {
  if (pool_) pool_->release(slot_);
}

int64_t KvStorage::bytes() const {
  int64_t bytes = 0;
  for (const auto& l : layers_) bytes += l.bytes();
  return bytes;
}

template <typename Pick>
std::pair<torch::Tensor, torch::Tensor> KvStorage::read(const KvLayer& l, const Pick& pick, bool sinks) const {
  if (sinks && kv_sinks_exact(format_)) return {pick(l.sink_keys), pick(l.sink_values)};
  if (!kv_quantized(format_)) return {pick(l.keys), pick(l.values)};
  return {dequantize_kv(pick(l.keys), pick(l.key_scales)), dequantize_kv(pick(l.values), pick(l.value_scales))};
}

void KvColumns::store(torch::Tensor& into, const torch::Tensor& x) const {
  if (index.defined()) into.index_copy_(1, index, x);
  else into.narrow(1, first, x.size(1)).copy_(x);
}

void KvStorage::put(KvLayer& l, const KvColumns& columns, const torch::Tensor& k, const torch::Tensor& v, bool sinks) {
  if (sinks && kv_sinks_exact(format_)) {
    columns.store(l.sink_keys, k.to(torch::kFloat32));
    columns.store(l.sink_values, v.to(torch::kFloat32));
  } else if (!kv_quantized(format_)) {
    columns.store(l.keys, k.to(l.keys.scalar_type()));
    columns.store(l.values, v.to(l.values.scalar_type()));
  } else {
    auto [qk, key_scales] = quantize_kv(k);
    auto [qv, value_scales] = quantize_kv(v);
    columns.store(l.keys, qk);
    columns.store(l.key_scales, key_scales);
    columns.store(l.values, qv);
    columns.store(l.value_scales, value_scales);
  }
}

std::pair<torch::Tensor, torch::Tensor> KvStorage::sinks(int64_t layer, int64_t count) const {
  return read(layers_[layer], [&](const torch::Tensor& t) { return t.narrow(1, 0, count); }, true);
}

std::pair<torch::Tensor, torch::Tensor> KvStorage::ring(int64_t layer) const {
  const int64_t capacity = layers_[layer].keys.size(1) - sinks_;
  return read(layers_[layer], [&](const torch::Tensor& t) { return t.narrow(1, sinks_, capacity); }, false);
}

void KvStorage::grow_ring(int64_t layer, int64_t needed) {
  const int64_t capacity = layers_[layer].keys.size(1) - sinks_;  // layers grow one after another
  if (needed <= capacity) return;
  const int64_t grown = std::min(recent_, std::max({needed, 2 * capacity, int64_t{16}}));
  auto bigger = KvLayer::zeros(format_, {}, heads_, sinks_, sinks_ + grown, head_dim_, device_);
  auto& old = layers_[layer];
  const auto from = old.entry_tensors(), to = bigger.entry_tensors();
  for (size_t i = 0; i < from.size(); ++i) to[i]->narrow(1, 0, sinks_ + capacity).copy_(*from[i]);
  bigger.sink_keys = old.sink_keys;  // the sinks' own tensors do not grow
  bigger.sink_values = old.sink_values;
  old = bigger;
}

KvWrites KvStorage::plan_writes(int64_t first, int64_t count) const {
  // Sinks go to their own slots; of the recent entries only the last R survive the chunk.
  KvWrites w;
  w.first = first;
  w.count = count;
  const int64_t first_recent = std::max(first, sinks_), end = first + count;
  const int64_t m = std::min(std::max<int64_t>(end - first_recent, 0), recent_);
  if (m > 0) {
    const int64_t slot = ring_slot(end - m), before_wrap = std::min(m, recent_ - slot);
    w.ring_parts.push_back({count - m, before_wrap, sinks_ + slot});
    if (before_wrap < m) w.ring_parts.push_back({count - m + before_wrap, m - before_wrap, sinks_});
  }
  w.ring_capacity_after = std::min(recent_, std::max<int64_t>(end - sinks_, 0));
  return w;
}

void KvStorage::write(int64_t layer, const KvWrites& w, const torch::Tensor& k, const torch::Tensor& v) {
  if (w.first < sinks_) {  // the whole chunk is sinks (chunks never straddle S)
    SINKLM_ASSERT(w.first + w.count <= sinks_, "chunk ", w.first, "+", w.count, " straddles ", sinks_, " sinks");
    put(layers_[layer], KvColumns{w.first}, k, v, true);
    return;
  }
  grow_ring(layer, w.ring_capacity_after);
  for (const auto& part : w.ring_parts)
    put(layers_[layer], KvColumns{part.column}, k.narrow(1, part.source, part.count), v.narrow(1, part.source, part.count),
        false);
}

torch::Tensor KvStorage::ring_columns(const std::vector<int64_t>& held, int64_t sinks_held) const {
  std::vector<int64_t> columns;
  for (size_t i = sinks_held; i < held.size(); ++i) columns.push_back(sinks_ + ring_slot(held[i]));
  return torch::tensor(columns, torch::kInt64).to(device_);
}

std::pair<torch::Tensor, torch::Tensor> KvStorage::gather(int64_t layer, const std::vector<int64_t>& held) const {
  const int64_t sinks = std::min<int64_t>(sinks_, static_cast<int64_t>(held.size()));
  const auto columns = ring_columns(held, sinks);
  auto [sink_k, sink_v] = this->sinks(layer, sinks);
  auto [ring_k, ring_v] = read(layers_[layer], [&](const torch::Tensor& t) { return t.index_select(1, columns); }, false);
  return {torch::cat({sink_k, ring_k}, 1), torch::cat({sink_v, ring_v}, 1)};
}

void KvStorage::place(int64_t layer, const std::vector<int64_t>& held, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t sinks = std::min<int64_t>(sinks_, static_cast<int64_t>(held.size()));
  const int64_t recent = static_cast<int64_t>(held.size()) - sinks;
  put(layers_[layer], KvColumns{0}, k.narrow(1, 0, sinks), v.narrow(1, 0, sinks), true);
  grow_ring(layer, recent);
  put(layers_[layer], KvColumns{0, ring_columns(held, sinks)}, k.narrow(1, sinks, recent), v.narrow(1, sinks, recent),
      false);
}

void KvStorage::adopt_pool(KvPools& pools, int64_t tag) {
  if (pool_) return;
  auto pool = pools.get(layers(), heads_, sinks_, recent_, head_dim_, format_, tag);
  slot_ = pool->acquire();
  pool_ = pool;
  for (int64_t l = 0; l < layers(); ++l) {
    auto pooled = pool->layer(slot_.page, l).select(slot_.index);  // [H, S+R, D]
    // Same layout; until the ring first fills, entry p sits in ring slot p - S < capacity: the prefix copies as is.
    const auto from = layers_[l].entry_tensors(), to = pooled.entry_tensors();
    for (size_t i = 0; i < from.size(); ++i) to[i]->narrow(1, 0, from[i]->size(1)).copy_(*from[i]);
    if (pooled.sink_keys.defined()) {
      pooled.sink_keys.copy_(layers_[l].sink_keys);
      pooled.sink_values.copy_(layers_[l].sink_values);
    }
    layers_[l] = pooled;
  }
}

void check_snapshot(const CacheSnapshot& s, const KvCachePolicy& policy, const ModelConfig& model) {
  if (s.format != policy.kv_format())
    fail("cache snapshot holds ", kv_format_name(s.format), " K/V entries, this cache stores ",
         kv_format_name(policy.kv_format()), "; restore it into a cache of its own format (--kv-dtype ",
         kv_format_name(s.format), ")");
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
