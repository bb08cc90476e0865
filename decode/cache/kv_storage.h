// The K/V memory of one stream, for every layer: where each held entry lives, how many bytes it takes, how it
// is read back in cache order and put back from a snapshot. The stream caches (decode/attention/stream_cache.h)
// attend over it; what they store (keys rotated or not) is theirs to say, where it goes is this file's.
//
// Layout per layer, the same as a slot of a shared pool (decode/cache/kv_pool.h: a KvLayer in the policy's K/V
// format, decode/cache/kv_format.h), keys stored transposed (kv_keys_zeros): [H, S + capacity, D], the S sinks
// at [:, 0:S) (int8: in their own float32 tensors) and a ring of recent entries at [:, S:S+capacity).
// Entries go in as float and come out as attention reads them (float32 for int8, else the storage dtype).
// Recent entry at stream position p >= S lives in ring slot (p - S) mod R; until the ring
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
  // The K/V format of the policy it was taken under (a relative cache's entries are exactly what that format
  // reads back; the literal reference stores float32 whatever it is); a cache of another format refuses it
  // (check_snapshot).
  KvFormat format = KvFormat::Fp32;
};

// UserError unless the snapshot's keys and values have the shapes policy.snapshot_shapes() gives after
// snapshot.stream_length tokens, and its format is the policy's.
void check_snapshot(const CacheSnapshot& snapshot, const KvCachePolicy& policy, const ModelConfig& model);

// Columns of a layer's entry dimension (of S + capacity) that entries go to: a run [first, first + count) or,
// where `index` [n] int64 is defined, those. A run is written by one copy that walks the transposed key storage
// in its own order; an index (index_copy_) takes each entry apart, 8x slower for a 256-entry chunk of keys.
struct KvColumns {
  int64_t first = 0;
  torch::Tensor index;
  // into[:, columns] = x [H, n(, D)], x already in into's dtype.
  void store(torch::Tensor& into, const torch::Tensor& x) const;
};

// Where a chunk of `count` entries at stream positions [first, first + count) goes, shared by the layers.
struct KvWrites {
  int64_t first = 0, count = 0;
  // The chunk's last m recent entries, the only ones that survive it: the part from index `source` in the chunk
  // goes to the run of ring columns from `column`. At most two parts: the ring wraps at most once (m <= R).
  struct Part {
    int64_t source = 0, count = 0, column = 0;
  };
  std::vector<Part> ring_parts;
  int64_t ring_capacity_after = 0;
};

class KvStorage {
 public:
  KvStorage(const KvCachePolicy& policy, const ModelConfig& model, KvFormat format, torch::Device device);
  ~KvStorage();
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  // Layer `layer` as stored, [H, S + capacity, D]: the sinks, then the ring.
  const KvLayer& layer(int64_t layer) const { return layers_[layer]; }
  // As attention reads them: the first `count` sinks {keys, values} [H, count, D], and the ring [H, capacity, D].
  std::pair<torch::Tensor, torch::Tensor> sinks(int64_t layer, int64_t count) const;
  std::pair<torch::Tensor, torch::Tensor> ring(int64_t layer) const;
  int64_t layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t ring_capacity() const { return layers_[0].keys.size(1) - sinks_; }
  KvFormat format() const { return format_; }
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
  // Stores the chunk's entries, k and v [H, count, D] (float), into layer `layer` in the storage format.
  void write(int64_t layer, const KvWrites& writes, const torch::Tensor& k, const torch::Tensor& v);
  // The entries at `held` (the policy's held_positions, ascending) in cache order: {keys, values} [H, N, D].
  std::pair<torch::Tensor, torch::Tensor> gather(int64_t layer, const std::vector<int64_t>& held) const;
  // Puts k and v [H, N, D] (cache order, float) at the slots of `held`.
  void place(int64_t layer, const std::vector<int64_t>& held, const torch::Tensor& k, const torch::Tensor& v);

  // Storage slots allocated, and their bytes summed over layers (keys and values).
  int64_t allocated_entries() const { return layers_[0].keys.size(1); }
  int64_t bytes() const;

  // Moves the contents into a slot of the pool of this shape in `pools` (tag: which pool of that shape);
  // idempotent. The pool and page it lives in after that, else {nullptr, -1}.
  void adopt_pool(KvPools& pools, int64_t tag);
  const std::shared_ptr<KvPool>& pool() const { return pool_; }
  const KvPool::Slot& slot() const { return slot_; }

 private:
  // The columns `pick` takes (from the sinks' own tensors where `sinks` and they are apart) as attention reads them.
  template <typename Pick>
  std::pair<torch::Tensor, torch::Tensor> read(const KvLayer& l, const Pick& pick, bool sinks) const;
  // Stores k, v [H, n, D] at `columns` (sink columns where `sinks`) in the storage format.
  void put(KvLayer& l, const KvColumns& columns, const torch::Tensor& k, const torch::Tensor& v, bool sinks);
  torch::Tensor ring_columns(const std::vector<int64_t>& held, int64_t sinks_held) const;

  int64_t sinks_, recent_, heads_, head_dim_;
  KvFormat format_;
  torch::Device device_;
  std::vector<KvLayer> layers_;  // per layer [H, S + capacity, D]; a pool slot once pooled
  std::shared_ptr<KvPool> pool_;              // set by adopt_pool
  KvPool::Slot slot_;
};

}  // namespace sinklm
