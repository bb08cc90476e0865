#include "train/sink_probe.h"

#include <torch/torch.h>

#include <chrono>

#include "core/error.h"
#include "data/shards/token_loader.h"
#include "model/attention_probe.h"

namespace sinklm {

std::unique_ptr<SinkProbe> SinkProbe::from_config(const Config& config, const ModelConfig& model, bool enabled) {
  const int64_t every = config.get_int("train.sink_probe_every");
  if (every == 0 || !enabled) return nullptr;
  return std::make_unique<SinkProbe>(model, config.get_string("data.shards"), every);
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
    sequences_.push_back(torch::tensor(std::vector<int64_t>(batch.begin() + s * tokens_, batch.begin() + (s + 1) * tokens_),
                                       torch::kInt64)
                             .unsqueeze(0));
}

nlohmann::json SinkProbe::measure(GPTNeoXForCausalLM& model, int64_t steps_done) const {
  const auto start = std::chrono::steady_clock::now();
  const int64_t L = model_.num_layers, H = model_.num_heads, T = tokens_, far = T / 2;
  const int64_t sinks = sink_prefix_length(model_);
  const bool sink_column = has_sink_column(model_.sink_mode);
  const torch::Device device = model->embed_out->weight.device();
  torch::Tensor mass = torch::zeros({L}, torch::kFloat64);          // summed over sequences
  torch::Tensor alpha0 = torch::zeros({L, H}, torch::kFloat64);     // summed over sequences
  for (const auto& ids : sequences_) {
    std::vector<torch::Tensor> probs = attention_probabilities(model, ids.to(device));  // L x [H, T, T]
    for (int64_t l = 0; l < L; ++l) {
      const torch::Tensor p = probs[l].to(torch::kFloat64);
      const torch::Tensor far_rows = p.narrow(1, far, T - far);  // [H, Q, T]
      const torch::Tensor on_sink = sinks > 0      ? far_rows.narrow(2, 0, sinks).sum(2)
                                    : sink_column ? 1 - far_rows.sum(2)
                                                  : far_rows.select(2, 0);  // [H, Q]
      mass[l] += on_sink.mean();
      alpha0[l] += p.select(2, 0).mean(1);  // key 0 from all T queries: [H]
    }
  }
  mass /= static_cast<double>(sequences_.size());
  alpha0 /= static_cast<double>(sequences_.size());
  const double sink_1 = (alpha0 > kEpsilon).to(torch::kFloat64).mean().item<double>();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {{"step", steps_done},
          {"sink_mass", std::vector<double>(mass.data_ptr<double>(), mass.data_ptr<double>() + L)},
          {"sink_1", sink_1},
          {"sink_probe_s", seconds}};
}

}  // namespace sinklm
