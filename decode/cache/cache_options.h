// What a user asks of a stream's cache (--cache, --window, --sinks, --positions, --kv-dtype, --head-policy,
// --retrieval-window in every command that runs a model, a session snapshot's fields on the server), and the
// one place their defaults are resolved. Every size that follows the model is kFollowModel (-1) until
// resolve_cache_options replaces it:
//   window            W = the model's trained length (train.seq_len; max_position_embeddings for HF)
//   sinks             S = the model's cache default (model/sink.h: default_cache_sinks); 0 for window; for
//                     recompute the model's sink tokens (sink_prefix_length: a token model's every re-encoded
//                     window starts with its sink, as in training; a vanilla model's window is plain)
//   retrieval_window  heads only: R = 4 W
// Any other value below 1 (0 sinks aside) is refused naming the field, so `--window 0` and
// `--retrieval-window 0` mean the same thing, an error, in every command.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "decode/cache/head_roles.h"
#include "decode/cache/kv_format.h"

namespace sinklm {

// cache: the i-th held entry sits at position i and the query at the number of entries before it (the
// StreamingLLM rule); stream: every token keeps its position in the stream.
enum class PositionRule { Cache, Stream };

inline constexpr int64_t kFollowModel = -1;

struct CacheOptions {
  std::string policy = "sink_window";                // full | window | sink_window | recompute | heads
  int64_t window = kFollowModel;                     // W (full: the limit)
  int64_t sinks = kFollowModel;                      // S
  PositionRule positions = PositionRule::Cache;
  KvFormat kv_format = KvFormat::Fp32;               // --kv-dtype (decode/cache/kv_format.h)
  std::shared_ptr<const HeadRoles> head_roles;       // heads: the head-policy file
  int64_t retrieval_window = kFollowModel;           // heads: R
};

// `options` with every kFollowModel replaced (the retrieval window only for heads) and every size checked:
// UserError naming `field` and the value. trained_positions: the model's trained length, or kFollowModel when
// the caller does not know it (then the window must be given). `warnings` (if given) receives a line for each
// size whose positions pass the trained length and for --positions stream. Idempotent.
CacheOptions resolve_cache_options(CacheOptions options, const ModelConfig& model, int64_t trained_positions,
                                   const std::string& field, std::vector<std::string>* warnings = nullptr);

PositionRule parse_position_rule(const std::string& text, const std::string& field = "positions");
const char* position_rule_name(PositionRule rule);

}  // namespace sinklm
