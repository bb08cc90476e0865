// Where attention goes, per layer and head: the mass on the model's sink (wherever its mode puts it:
// model/sink.h, sink_site / sink_attention_mass) and on the first text positions, averaged over segments and
// over the queries far from the start (the second half of each segment, T/2 .. T-1), and the statistics
// the mode's row adds (model/sink.h: SinkModeSpec::statistics; gated models: their output gates). `sinklm analyze`
// reports it (heads.json, analysis.md, PNGs) and the training probe logs it (train/monitor/sink_probe.h), so the
// two agree by construction.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_neox.h"

namespace sinklm {

struct AttentionMass {
  torch::Tensor sink;                // [L, H] float64: mean mass on the sink
  torch::Tensor first_positions;     // [L, H, first] float64: mean mass on text positions 0 .. first-1
  torch::Tensor key0;                // [L, H] float64: mean attention key 0 receives from all T queries
  // The sink's value norm (its tokens' mean; a column's value, 0 without one; position 0 for a vanilla or
  // gated model) beside the mean value norm of the text keys: [L, H] float64 each, means over segments.
  torch::Tensor sink_value_norm, value_norm;
  // With query classes: the sink mass of the far queries of each class apart, [L, H] float64 (means over
  // all such queries of all segments); undefined without classes.
  torch::Tensor sink_trigger, sink_other;
  int64_t trigger_queries = 0, other_queries = 0;
  std::vector<torch::Tensor> maps;   // per layer [M, M] float64: the first M rows and columns, mean over heads
  // The mode's statistics, in its row's order (model/sink.h: SinkModeSpec::statistics): [L, H] float64 each.
  std::vector<SinkStatistic> statistic_specs;
  std::vector<torch::Tensor> statistics;
  int64_t far = 0, tokens = 0;       // the queries averaged over: far .. tokens-1

  // The statistic of that name ([L, H]), undefined when the mode has none.
  torch::Tensor statistic(const std::string& name) const;
};

// segments: token ids, each the same length T with the model's sink prefix first (model/sink.h:
// with_sink_prefix); first: text positions reported per head (sink prefix + first <= T); map_tokens: M of
// the maps (0: none); trigger: empty, or per segment [T], true at the queries of the first class (the
// synthetic source's trigger positions, where its copy head must act; every other query is the second).
AttentionMass measure_attention_mass(GPTNeoXForCausalLM& model, const std::vector<std::vector<int64_t>>& segments,
                                     int64_t first, int64_t map_tokens,
                                     const std::vector<std::vector<bool>>& trigger = {});

}  // namespace sinklm
