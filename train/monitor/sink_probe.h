// Sink onset tracking during training (train.sink_probe_every): where the model's attention goes, measured
// every N steps on the same fixed validation sequences, one metrics.jsonl record each.
//
// Sequences: the first kSequences validation samples of kTokens positions (sink tokens of a `token` model
// first, exactly as in training; file order), kTokens = min(64, model.max_position_embeddings). Per layer,
// from measure_attention_mass (model/analysis/attention_mass.h, the function `sinklm analyze` reports):
//   sink_mass[l]  mean over heads, sequences and the queries T/2..T-1 ("far from the start") of the mass
//                 on the sink: the sink token(s) (token), the mass the sink column absorbed, 1 - row sum
//                 (softmax1 / logit), or position 0 (none). The same numbers as `sinklm analyze --tokens T
//                 --segments kSequences` on the same text prints as "mean mass on ..." per layer.
//   sink_1        Gu et al.'s Sink_1^eps (ICLR 2025, arXiv 2410.10781): the fraction of (layer, head) pairs
//                 whose alpha_0 > eps = 0.3, alpha_0 being the mean attention key 0 (the first position: the
//                 sink token of a `token` model, else the first text token) receives from all T queries.
// Record: {"step", "sink_mass": [L], "sink_1", then per layer the mean over heads of each statistic the mode's
// row adds (model/sink.h: SinkModeSpec::statistics; gated: "gate_mean", "gate_dormant"),
// "sink_probe_s"} (seconds spent measuring).
#pragma once
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "model/gpt_neox.h"

namespace sinklm {

class SinkProbe {
 public:
  static constexpr int64_t kTokens = 64;
  static constexpr int64_t kSequences = 8;
  static constexpr double kEpsilon = 0.3;

  // nullptr when train.sink_probe_every is 0 or `enabled` is false (ranks other than 0). Reads the
  // validation split of data.shards (a UserError naming the key when it has none).
  static std::unique_ptr<SinkProbe> from_config(const Config& config, const ModelConfig& model, bool enabled);
  SinkProbe(const ModelConfig& model, const std::string& shard_dir, int64_t every);

  bool due(int64_t steps_done) const { return steps_done % every_ == 0; }
  // One metrics.jsonl record for the model as it is after `steps_done` steps.
  nlohmann::json measure(GPTNeoXForCausalLM& model, int64_t steps_done) const;

  int64_t tokens() const { return tokens_; }

 private:
  ModelConfig model_;
  int64_t every_ = 0, tokens_ = 0;
  std::vector<std::vector<int64_t>> sequences_;  // kSequences x tokens_ ids, the sink prefix first
};

}  // namespace sinklm
