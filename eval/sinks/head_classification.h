// Which heads need more than sinks and a recent window (DuoAttention's retrieval and streaming heads), as
// measured on the target model. Two scores per layer and head:
//   recall_loss     what the head costs: the recall probe's accuracy (eval/sinks/recall_probe.h) at distances
//                   beyond W with every head keeping the retrieval budget R, minus that accuracy when this
//                   head alone keeps only S + (W - S). Needs a recall source; L H + 1 probe runs.
//   attention_mass  the attention mass a query puts on the keys a sink+window cache of W entries (S sinks)
//                   has evicted by then, keys j with S <= j <= q - (W - S), averaged over the queries q >= W
//                   of calibration segments (full attention, one forward per segment). Any text.
// On the recall model recall_loss is the better predictor: its top heads keep recall far beyond W, the top
// heads by mass much less (docs/results.md). Mass says where a head looks, not whether the answer needs it.
// `sinklm analyze --classify-heads FILE` writes the result as a head-policy file (decode/cache/head_roles.h).
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/synthetic/fact_recall.h"
#include "eval/sinks/recall_probe.h"
#include "model/gpt_neox.h"
#include "decode/cache/head_roles.h"

namespace sinklm {

// segments: token ids, each the same length T > window, the model's sink prefix first. [L, H] float64.
torch::Tensor mass_beyond_window(GPTNeoXForCausalLM& model, const std::vector<std::vector<int64_t>>& segments,
                                 int64_t sinks, int64_t window);

// cache: window W, sinks, retrieval window R and position rule of the caches compared; options.distances
// should lie in (W, R). [L, H] float64.
torch::Tensor recall_loss_per_head(CachedDecoder& decoder, const FactRecall& source, const CacheOptions& cache,
                                   const RecallProbeOptions& options);

// The `count` heads of largest score ([L, H]) are retrieval heads (ties: the earlier layer and head).
HeadRoles top_scoring_heads(const torch::Tensor& scores, int64_t count);

// What `sinklm analyze --classify-heads` asks for.
struct HeadClassificationOptions {
  CacheOptions cache;            // resolved (resolve_cache_options): W, S, R and the position rule compared
  int64_t retrieval_heads = -1;  // K heads that keep R; -1: a quarter of the heads, rounded up
  std::string score;             // recall-loss | attention-mass; "": recall-loss with a recall source
  RecallProbeOptions probe;      // recall-loss: pairs, seed; distances empty: W + (R - W)/4, /2, 3/4
};

struct HeadClassification {
  HeadRoles roles;
  std::string score;              // what ranked the heads
  torch::Tensor mass, loss;       // [L, H] float64; loss only with a recall source
  nlohmann::json calibration;     // window, sinks, retrieval_window, positions, segments, seed, distances
};

// Scores every head on the calibration `segments` (each longer than W, the sink prefix first) and, with a
// recall `source`, on its probe; the K heads of the chosen score become retrieval heads. UserError naming the
// flag (--sinks, --tokens, --retrieval-heads, --score) when the options do not fit the model or the segments.
HeadClassification classify_heads(CachedDecoder& decoder, const std::vector<std::vector<int64_t>>& segments,
                                  const FactRecall* source, const HeadClassificationOptions& options);

// The head-policy file (decode/cache/head_roles.h: head_roles_json) with "score", "scores" (per score [L][H])
// and "calibration".
nlohmann::json head_classification_json(const HeadClassification& result);

}  // namespace sinklm
