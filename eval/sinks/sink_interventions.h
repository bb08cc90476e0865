// What a model's sink is for, measured by intervening on it (StreamingLLM's Table 1; the dormant-head
// mechanism of Guo et al. 2024): the mean NLL of the same text targets, the far queries q = T/2 .. T-2 of each
// segment predicting ids[q + 1] (the queries model/analysis/attention_mass.h averages over), with each segment
//   intact       as trained (the model's sink prefix first)
//   evicted      without its first `sinks` positions (a token model's sink tokens; a vanilla or gated model's
//                first text tokens): every later token `sinks` positions earlier, the full-sequence twin of
//                evicting the sinks from a cache (0+W)
//   masked       unchanged, but keys 0 .. sinks-1 hidden from every query after them. With rotary (or no)
//                positions a query sees only distances, which eviction's shift keeps, so for a position
//                sink this equals `evicted` (to rounding; the tests hold it there): in a full sequence,
//                hiding the sink is removing it. (A cache differs: its entries were computed while the sink
//                was visible, which is what a stream's 0+W measures.) A column mode's column is dropped
//                from the softmax instead: the same weights as a vanilla model.
//   substituted  with `substitute` (an ordinary token: Table 1's "\n") at positions 0 .. sinks-1: is it the
//                position or the content?
// A column mode (softmax1, logit, kv) has no position to evict or substitute: those losses are NaN, as is
// `substituted` when `substitute` is -1 (no ordinary token given).
// With query classes (the synthetic source's triggers, model/analysis/attention_mass.h) each loss is also split by
// the class of its query.
#pragma once
#include <cstdint>
#include <vector>

#include "model/gpt_neox.h"

namespace sinklm {

struct InterventionLoss {
  double all = 0, trigger = 0, other = 0;  // mean NLL (nats) over all far targets and each class's (NaN: no class)
};

struct InterventionLosses {
  InterventionLoss intact, evicted, masked, substituted;
};

struct SinkInterventions : InterventionLosses {  // the losses over all segments' far targets
  int64_t sinks = 0, substitute = -1;  // sinks: the positions intervened on (0: a column mode's column)
  int64_t targets = 0, trigger_targets = 0;  // over all segments
  std::vector<InterventionLosses> per_segment;  // each segment's alone, in order (for intervals over segments)
};

// segments: as measure_attention_mass takes them (each T ids, sink prefix first), with `sinks` < T / 2;
// trigger: empty or per segment [T] (true at a trigger query).
SinkInterventions intervene_on_sink(GPTNeoXForCausalLM& model, const std::vector<std::vector<int64_t>>& segments,
                                    int64_t sinks, int64_t substitute, const std::vector<std::vector<bool>>& trigger = {});

}  // namespace sinklm
