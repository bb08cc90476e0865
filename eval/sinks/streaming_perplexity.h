// Streaming perplexity (the paper's long-text evaluation): a text flows through one stream whose cache
// evicts as it goes; every next-token prediction is scored. A token-sink model sees its sink tokens first.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <vector>

#include "decode/cached_decoder.h"

namespace sinklm {

// What a stream's cache held as it went: (stream length, KV entries) points and the most entries.
struct KvTrace {
  std::vector<std::pair<int64_t, int64_t>> points;
  int64_t max_entries = 0;
};

// Feeds `ids` (the sink prefix included) through a fresh stream of `policy`, `chunk` tokens at a time, and
// hands each chunk's float32 logits to `on_logits(first, logits)`: logits [T, V], row i at stream position
// first + i (it predicts ids[first + i + 1]). Records the KV entries every `trace_every` tokens (at least
// once per chunk) and asserts they never exceed the budget.
KvTrace stream_logits(CachedDecoder& decoder, std::shared_ptr<const KvCachePolicy> policy, PositionRule rule,
                      KeyRotation rotation, const std::vector<int64_t>& ids, int64_t chunk, int64_t trace_every,
                      const std::function<void(int64_t first, const torch::Tensor& logits)>& on_logits);

struct StreamingPerplexityOptions {
  int64_t chunk = 256;             // prefill chunk (the cache sees every token exactly as in decoding)
  int64_t segment = 1000;          // tokens per perplexity segment
  int64_t kv_trace_every = 0;      // record the KV entry count every N tokens (0 = once per chunk)
  KeyRotation rotation = KeyRotation::Relative;
};

struct StreamingPerplexity {
  std::vector<float> nll;                // per scored text token i = 1..N-1 (token 0 has no prediction)
  std::vector<int64_t> top1;             // and the id its prediction ranked first (its logits' argmax)
  int64_t eviction_starts_at = -1;       // index into nll of the first prediction made after an eviction
  KvTrace kv;
  double seconds = 0;
  nlohmann::json summary(int64_t segment) const;  // ppl overall, per segment, before/after eviction, trace
};

StreamingPerplexity streaming_perplexity(CachedDecoder& decoder, std::shared_ptr<const KvCachePolicy> policy,
                                         PositionRule rule, const std::vector<int64_t>& text_ids,
                                         const StreamingPerplexityOptions& options);

}  // namespace sinklm
