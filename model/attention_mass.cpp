#include "model/attention_mass.h"

#include <torch/torch.h>

#include "core/error.h"
#include "model/attention_probe.h"

namespace sinklm {

AttentionMass measure_attention_mass(GPTNeoXForCausalLM& model, const std::vector<std::vector<int64_t>>& segments,
                                     int64_t first, int64_t map_tokens) {
  const ModelConfig& c = model->config();
  const int64_t L = c.num_layers, H = c.num_heads, sinks = sink_prefix_length(c);
  SINKLM_ASSERT(!segments.empty(), "no segments to analyse");
  const int64_t T = static_cast<int64_t>(segments[0].size());
  SINKLM_ASSERT(sinks + first <= T && map_tokens <= T, "segments shorter than the positions asked for");
  AttentionMass mass;
  mass.tokens = T;
  mass.far = T / 2;
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  mass.sink = torch::zeros({L, H}, f64);
  mass.first_positions = torch::zeros({L, H, first}, f64);
  mass.key0 = torch::zeros({L, H}, f64);
  if (map_tokens > 0) mass.maps.assign(L, torch::zeros({map_tokens, map_tokens}, f64));
  mass.statistic_specs = sink_mode_spec(c.sink_mode).statistics;
  mass.statistics.assign(mass.statistic_specs.size(), torch::Tensor());
  for (auto& t : mass.statistics) t = torch::zeros({L, H}, f64);
  const torch::Device device = model->embed_out->weight.device();
  for (const auto& ids : segments) {
    SINKLM_ASSERT(static_cast<int64_t>(ids.size()) == T, "segments of different lengths");
    auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);
    const AttentionRecord record = record_attention(model, input);
    for (int64_t l = 0; l < L; ++l) {
      const torch::Tensor p = record.probabilities[l].to(torch::kFloat64);  // [H, T, T]
      const torch::Tensor far_rows = p.narrow(1, mass.far, T - mass.far);  // [H, Q, T]
      mass.sink[l] += sink_attention_mass(c, far_rows).mean(1);
      mass.first_positions[l] += far_rows.narrow(2, sinks, first).mean(1);
      mass.key0[l] += p.select(2, 0).mean(1);
      if (map_tokens > 0) mass.maps[l] += p.narrow(1, 0, map_tokens).narrow(2, 0, map_tokens).mean(0);
      const LayerObservation observed{p, record.gates.empty() ? torch::Tensor() : record.gates[l].to(torch::kFloat64), mass.far};
      for (size_t s = 0; s < mass.statistics.size(); ++s) mass.statistics[s][l] += mass.statistic_specs[s].per_head(observed);
    }
  }
  const double n = static_cast<double>(segments.size());
  for (auto* t : {&mass.sink, &mass.first_positions, &mass.key0}) *t /= n;
  for (auto& t : mass.statistics) t /= n;
  for (auto& map : mass.maps) map /= n;
  return mass;
}

torch::Tensor AttentionMass::statistic(const std::string& name) const {
  for (size_t s = 0; s < statistic_specs.size(); ++s)
    if (name == statistic_specs[s].name) return statistics[s];
  return {};
}

}  // namespace sinklm
