#include "train/monitor/sink_probe.h"

#include <torch/torch.h>

#include <chrono>

#include "core/error.h"
#include "data/shards/token_loader.h"
#include "train/train_options.h"
#include "model/analysis/attention_mass.h"

namespace sinklm {

std::unique_ptr<SinkProbe> SinkProbe::from_config(const Config& config, const ModelConfig& model, bool enabled) {
  const int64_t every = config.get_int("train.sink_probe_every");
  if (every == 0 || !enabled) return nullptr;
  return std::make_unique<SinkProbe>(model, shard_sources(config).front().shards, every);
}

SinkProbe::SinkProbe(const ModelConfig& model, const std::string& shard_dir, int64_t every)
    : model_(model), every_(every), tokens_(std::min(kTokens, model.max_position_embeddings)) {
  const int64_t sinks = sink_prefix_length(model_);
  if (tokens_ < sinks + 2)
    fail("train.sink_probe_every: model.max_position_embeddings (", model.max_position_embeddings,
         ") leaves no query far from the sink; set train.sink_probe_every=0");
  LoaderOptions options;
  options.seq_len = tokens_;
  options.global_batch = kSequences;
  options.shuffle = false;  // file order: the first validation windows, the same on every run
  for (int64_t id : sink_prefix(model_)) options.sink_ids.push_back(static_cast<uint32_t>(id));
  TokenLoader loader = TokenLoader::open(shard_dir, Split::Validation, options);
  std::vector<uint32_t> batch = loader.next_batch();  // [kSequences, tokens_] row-major
  for (int64_t s = 0; s < kSequences; ++s)
    sequences_.emplace_back(batch.begin() + s * tokens_, batch.begin() + (s + 1) * tokens_);
}

namespace {

// [L, H] float64 -> per layer, the mean over heads.
std::vector<double> layer_means(const torch::Tensor& per_head) {
  const torch::Tensor m = per_head.mean(1).contiguous();  // [L]
  return std::vector<double>(m.data_ptr<double>(), m.data_ptr<double>() + m.numel());
}

}  // namespace

nlohmann::json SinkProbe::measure(GPTNeoXForCausalLM& model, int64_t steps_done) const {
  const auto start = std::chrono::steady_clock::now();
  const AttentionMass mass = measure_attention_mass(model, sequences_, /*first=*/0, /*map_tokens=*/0);
  const double sink_1 = (mass.key0 > kEpsilon).to(torch::kFloat64).mean().item<double>();
  nlohmann::json out = {{"step", steps_done}, {"sink_mass", layer_means(mass.sink)}, {"sink_1", sink_1}};
  for (size_t s = 0; s < mass.statistics.size(); ++s) out[mass.statistic_specs[s].name] = layer_means(mass.statistics[s]);
  out["sink_probe_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace sinklm
