// The K/V memory of one stream, for every layer: where each held entry lives, how many bytes it takes, how it
// is read back in cache order and put back from a snapshot. The stream caches (decode/attention/stream_cache.h)
// attend over it; what they store (keys rotated or not) is theirs to say, where it goes is this file's.
//
// Layout per layer, the same as a slot of a shared pool (decode/cache/kv_pool.h), keys stored transposed
// (kv_keys_zeros): [H, S + capacity, D], the S sinks at [:, 0:S) and a ring of recent entries at
// [:, S:S+capacity). Recent entry at stream position p >= S lives in ring slot (p - S) mod R; until the ring
// first fills that is p - S, so capacity grows by copying (doubling, up to R) and a policy that never fills
// its budget (full) pays only for what it holds. adopt_pool moves the storage into a pool slot for good.
#pragma once
#include <torch/types.h>

#include <memory>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "decode/cache/kv_cache_policy.h"
#include "decode/cache/kv_pool.h"

namespace sinklm {

// A cache's contents in a position-free form: for persistence and for moving contents to another position.
struct CacheSnapshot {
  int64_t stream_length = 0;
  // Per layer [H, N, D] in cache order, before rotary (float32, CPU); for a head-aware policy one tensor per
  // layer and head group, [H_g, N_g, D] (KvCachePolicy::snapshot_shapes).
  std::vector<torch::Tensor> keys;
  std::vector<torch::Tensor> values;  // shaped as keys
};

// UserError unless the snapshot's keys and values have the shapes policy.snapshot_shapes() gives after
// snapshot.stream_length tokens.
void check_snapshot(const CacheSnapshot& snapshot, const KvCachePolicy& policy, const ModelConfig& model);

// Where a chunk of `count` entries at stream positions [first, first + count) goes, shared by the layers.
struct KvWrites {
  int64_t first = 0, count = 0;
  torch::Tensor ring_slots;  // [m] ring slots of the chunk's last m recent entries (the only ones that survive it)
  int64_t ring_source = 0;   // index in the chunk of the first of those m entries
  int64_t ring_capacity_after = 0;
};

class KvStorage {
 public:
  KvStorage(const KvCachePolicy& policy, const ModelConfig& model, torch::ScalarType dtype, torch::Device device);
  ~KvStorage();
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  // [H, S + capacity, D] of layer `layer`: the sinks, then the ring.
  const torch::Tensor& keys(int64_t layer) const { return keys_[layer]; }
  const torch::Tensor& values(int64_t layer) const { return values_[layer]; }
  torch::Tensor ring_keys(int64_t layer) const { return ring(keys_[layer]); }      // [H, capacity, D]
  torch::Tensor ring_values(int64_t layer) const { return ring(values_[layer]); }  // [H, capacity, D]
  int64_t layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t ring_capacity() const { return keys_[0].size(1) - sinks_; }
  torch::ScalarType dtype() const { return keys_[0].scalar_type(); }
  torch::Device device() const { return device_; }

  // Held after `stream_length` tokens: the sinks among them and the recent entries in the ring.
  int64_t sinks_held(int64_t stream_length) const { return std::min(sinks_, stream_length); }
  int64_t ring_count(int64_t stream_length) const { return std::min(recent_, stream_length - sinks_held(stream_length)); }
  int64_t ring_slot(int64_t position) const { return (position - sinks_) % recent_; }
  torch::Tensor ring_slots_of(const torch::Tensor& positions) const { return (positions - sinks_).remainder(recent_); }

  // Capacity for `needed` ring entries in layer `layer` (no-op when there is room).
  void grow_ring(int64_t layer, int64_t needed);
  // The slots of a chunk (chunks never straddle S: all sinks or all recent).
  KvWrites plan_writes(int64_t first, int64_t count) const;
  // Stores the chunk's entries, k and v [H, count, D] in the storage dtype, into layer `layer`.
  void write(int64_t layer, const KvWrites& writes, const torch::Tensor& k, const torch::Tensor& v);
  // The entries at `held` (the policy's held_positions, ascending) in cache order: {keys, values} [H, N, D].
  std::pair<torch::Tensor, torch::Tensor> gather(int64_t layer, const std::vector<int64_t>& held) const;
  // Puts k and v [H, N, D] (cache order, the storage dtype) at the slots of `held`.
  void place(int64_t layer, const std::vector<int64_t>& held, const torch::Tensor& k, const torch::Tensor& v);

  // Storage slots allocated, and their bytes summed over layers (keys and values).
  int64_t allocated_entries() const { return keys_[0].size(1); }
  int64_t bytes() const {
    return 2 * layers() * keys_[0].numel() * static_cast<int64_t>(keys_[0].element_size());
  }

  // Moves the contents into a slot of the pool of this shape in `pools` (tag: which pool of that shape);
  // idempotent. The pool and page it lives in after that, else {nullptr, -1}.
  void adopt_pool(KvPools& pools, int64_t tag);
  const std::shared_ptr<KvPool>& pool() const { return pool_; }
  const KvPool::Slot& slot() const { return slot_; }

 private:
  torch::Tensor ring(const torch::Tensor& layer) const { return layer.narrow(1, sinks_, layer.size(1) - sinks_); }
  torch::Tensor slot_index(const std::vector<int64_t>& held, int64_t sinks_held) const;

  int64_t sinks_, recent_, heads_, head_dim_;
  torch::Device device_;
  std::vector<torch::Tensor> keys_, values_;  // per layer [H, S + capacity, D]; a pool slot once pooled
  std::shared_ptr<KvPool> pool_;              // set by adopt_pool
  KvPool::Slot slot_;
};

}  // namespace sinklm
