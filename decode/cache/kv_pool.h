// Shared storage for the KV caches of many streams of one shape (S sinks + R recent, decode/cache/kv_cache_policy.h),
// so that the decode steps of all streams in a page attend in one call per layer, reading every cache in
// place (no per-step copy: decoding is bound by memory traffic).
//
// Layout: pages of `page_slots` streams; for page p and layer l, keys(p, l) and values(p, l) are
// a KvLayer of [page_slots, ...] in the policy's K/V format (decode/cache/kv_format.h): a stream's slot s holds its
// sinks at [s, :, 0:S) and its ring of recent entries at [s, :, S:S+R) (ring slot of stream position t >= S:
// (t - S) mod R). Keys are stored transposed (kv_keys_zeros). Slots are handed out lowest first, so the
// streams decoding together usually form one contiguous run of a page.
#pragma once
#include <torch/types.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "decode/cache/kv_format.h"

namespace sinklm {

// Zeros for keys of `shape` [..., entries, D], stored transposed ([..., D, entries] in memory; the result is
// a view): scores q · K^T then read each head's keys as one contiguous [D, entries] matrix, which a CPU BLAS
// streams ~25% faster than the transposed [entries, D] one (decode steps are matrix-vector products). Writing
// a new key touches D cache lines instead of one, which matters less as the cache grows.
torch::Tensor kv_keys_zeros(std::vector<int64_t> shape, const torch::TensorOptions& options);

// One layer's K/V, as stored, of one stream (lead = {}) or of a run of stream slots (lead = {m}); the entry
// dimension follows the head one in every tensor but the sinks'.
struct KvLayer {
  torch::Tensor keys, values;              // [lead.., H, S + capacity, D] in kv_storage_dtype; keys transposed
  torch::Tensor key_scales, value_scales;  // quantised formats: [lead.., H, S + capacity] float16
  torch::Tensor sink_keys, sink_values;    // int8 (sinks exact): [lead.., H, S, D] float32; attention then
                                           // ignores the int8 sink columns

  // A layer of `format` with `entries` = S + capacity columns, all zero.
  static KvLayer zeros(KvFormat format, std::vector<int64_t> lead, int64_t heads, int64_t sinks, int64_t entries,
                       int64_t head_dim, torch::Device device);
  // The tensors that have the entry dimension (keys, values and any scales), and every defined tensor.
  std::vector<torch::Tensor*> entry_tensors();
  std::vector<const torch::Tensor*> all() const;
  // Slots [first, first + count) of a run, and slot i of it as one stream's layer.
  KvLayer narrow(int64_t first, int64_t count) const;
  KvLayer select(int64_t index) const;
  KvLayer unsqueeze() const;  // one stream's layer as a run of one
  int64_t bytes() const;
};

class KvPool {
 public:
  KvPool(int64_t layers, int64_t heads, int64_t sinks, int64_t recent, int64_t head_dim, KvFormat format,
         torch::Device device, int64_t page_slots = 16);

  struct Slot {
    int64_t page = -1, index = -1;
  };
  Slot acquire();  // zeroed; thread-safe
  void release(Slot slot);  // thread-safe

  const KvLayer& layer(int64_t page, int64_t layer) const { return pages_[page].layers[layer]; }  // [P, ...]
  int64_t sinks() const { return sinks_; }
  int64_t recent() const { return recent_; }
  KvFormat format() const { return format_; }
  int64_t page_slots() const { return page_slots_; }

 private:
  struct Page {
    std::vector<KvLayer> layers;
    std::vector<bool> used;
  };
  int64_t layers_, heads_, sinks_, recent_, head_dim_, page_slots_;
  KvFormat format_;
  torch::Device device_;
  std::deque<Page> pages_;  // never freed (a server's peak of streams is its steady state); never moved
  std::mutex mutex_;
};

// The pools of one decoder, one per shape and tag: a cache asks for the pool of its own shape, and a
// head-aware cache (decode/attention/stream_cache.h) pools each layer's head group apart (tag: its place in the model),
// so that the streams decoding together take the same slot run in every one of its pools.
class KvPools {
 public:
  explicit KvPools(torch::Device device) : device_(device) {}
  std::shared_ptr<KvPool> get(int64_t layers, int64_t heads, int64_t sinks, int64_t recent, int64_t head_dim,
                              KvFormat format, int64_t tag);  // thread-safe

 private:
  torch::Device device_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, KvFormat, int64_t>, std::shared_ptr<KvPool>>
      pools_;
  std::mutex mutex_;
};

}  // namespace sinklm
