// Forward passes of many token streams at once through their KV caches (continuous batching).
//
// Each DecoderStream owns its cache policy, position rule and cache. CachedDecoder::step() takes one chunk
// of new ids per participating stream and runs the model's one decoder layer (model/gpt_neox.h) over all
// chunks packed in one batch row: the token-wise parts (LayerNorms, projections, MLP) as one batch, the
// attention through a back-end that sends each chunk to its own stream's cache. Streams join
// and leave between steps simply by being passed or not. Recompute streams keep no KV: each of their tokens
// re-encodes the held tokens from scratch (the baseline StreamingLLM is measured against).
#pragma once
#include <torch/types.h>

#include <deque>
#include <memory>
#include <vector>

#include "model/gpt_neox.h"
#include "decode/attention/stream_cache.h"

namespace sinklm {

class DecoderStream {
 public:
  DecoderStream(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, KeyRotation rotation,
                const ModelConfig& model, torch::Device device);
  // Resumes a stream from its snapshot and the ids at its held positions.
  DecoderStream(std::shared_ptr<const KvCachePolicy> policy, PositionRule rule, KeyRotation rotation,
                const ModelConfig& model, torch::Device device, const CacheSnapshot& snapshot,
                std::vector<int64_t> held_tokens);

  int64_t length() const { return length_; }  // tokens streamed so far
  // KV entries held (recompute: tokens held), counted from storage; never above policy().budget().
  int64_t entries() const;
  int64_t cache_allocated_entries() const;  // storage slots allocated (recompute: tokens held)
  int64_t kv_bytes() const;                 // K/V storage allocated, all layers and heads (recompute: 0)
  const KvCachePolicy& policy() const { return *policy_; }
  PositionRule position_rule() const { return rule_; }
  std::shared_ptr<const KvCachePolicy> shared_policy() const { return policy_; }
  // The ids at the held positions (sinks, then the recent run), as the cache holds them.
  const std::deque<int64_t>& held_tokens() const { return held_tokens_; }
  CacheSnapshot snapshot() const;  // recompute: an empty cache snapshot with the stream length
  // The longest chunk the next step accepts (recompute streams take any).
  int64_t max_chunk(int64_t preferred) const;

 private:
  friend class CachedDecoder;
  void record(const std::vector<int64_t>& ids);  // after a chunk: advance length and held tokens

  std::shared_ptr<const KvCachePolicy> policy_;
  PositionRule rule_;
  std::unique_ptr<StreamCache> cache_;  // null for recompute
  std::deque<int64_t> held_tokens_;
  int64_t length_ = 0;
};

// K/V held by a set of streams: entries (per stream, the union over heads) and bytes of storage.
struct KvUsage {
  int64_t entries = 0, bytes = 0;
  void add(const DecoderStream& stream) {
    entries += stream.entries();
    bytes += stream.kv_bytes();
  }
};

struct StreamChunk {
  DecoderStream* stream;
  std::vector<int64_t> ids;  // 1 <= size <= stream->max_chunk(size)
  // false: nobody reads this chunk's logits (a prompt's chunk before its last), so the LM head skips its rows
  // and step() returns an undefined tensor for it.
  bool logits = true;
};

enum class LogitsWanted { Last, All };

class CachedDecoder {
 public:
  // Puts the model in eval mode and packs its projections for few-row products (model/projection.h); the
  // packed copies are taken now, so the model's weights must not change while this decoder serves it.
  explicit CachedDecoder(GPTNeoXForCausalLM model);

  // Appends each chunk to its stream. Returns per chunk float32 logits [T, V] (All) or [1, V] (Last), undefined
  // for a chunk that wants none.
  std::vector<torch::Tensor> step(const std::vector<StreamChunk>& chunks, LogitsWanted wanted = LogitsWanted::Last);

  const ModelConfig& config() const { return model_->config(); }
  GPTNeoXForCausalLM& model() { return model_; }
  torch::Device device() const;
  // Decode tokens of streams whose policies fill their budget attend in one call per layer and pool page
  // (decode/cache/kv_pool.h); off: every stream attends on its own (the reference the batched path is tested
  // against, and the baseline of `sinklm bench-decode --no-batch`).
  void set_batched_decode(bool on) { batched_decode_ = on; }
  int64_t batched_decode_tokens() const { return batched_decode_tokens_; }  // decode tokens attended in batches

 private:
  std::vector<torch::Tensor> cached_step(const std::vector<StreamChunk>& chunks, LogitsWanted wanted);
  torch::Tensor recompute_step(const StreamChunk& chunk, LogitsWanted wanted);
  // Moves the caches of this step's decode tokens into the pool of their shape.
  void pool_decoding_caches(const std::vector<StreamChunk>& chunks);

  GPTNeoXForCausalLM model_;
  bool batched_decode_ = true;
  int64_t batched_decode_tokens_ = 0;
  KvPools pools_;  // the shared K/V storage of decoding streams, by shape
};

}  // namespace sinklm
