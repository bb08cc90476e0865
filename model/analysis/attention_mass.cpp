#include "model/analysis/attention_mass.h"

#include <torch/torch.h>

#include "core/error.h"
#include "model/analysis/attention_probe.h"

namespace sinklm {

namespace {

// [H]: the sink's value norm in one layer's record (model/sink.h: sink_site).
torch::Tensor sink_value_norm(const ModelConfig& c, const AttentionRecord& record, int64_t layer) {
  const torch::Tensor& norms = record.value_norms[layer];  // [H, T]
  switch (sink_site(c.sink_mode)) {
    case SinkSite::Tokens: return norms.narrow(1, 0, sink_prefix_length(c)).mean(1);
    case SinkSite::Column:
      SINKLM_ASSERT(static_cast<int64_t>(record.column_value_norms.size()) > layer, "a column site without a column");
      return record.column_value_norms[layer];
    case SinkSite::FirstPosition: return norms.select(1, 0);
  }
  SINKLM_ASSERT(false, "unhandled SinkSite");
}

// Adds the sink mass of one segment's far queries of each class (per_query [H, Q]; trigger [Q] float64,
// 1 at a trigger query) to layer `layer`'s sums.
void add_by_class(AttentionMass& mass, int64_t layer, const torch::Tensor& per_query, const torch::Tensor& trigger) {
  mass.sink_trigger[layer] += (per_query * trigger).sum(1);
  mass.sink_other[layer] += (per_query * (1 - trigger)).sum(1);
}

}  // namespace

AttentionMass measure_attention_mass(GPTNeoXForCausalLM& model, const std::vector<std::vector<int64_t>>& segments,
                                     int64_t first, int64_t map_tokens, const std::vector<std::vector<bool>>& trigger) {
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
  mass.sink_value_norm = torch::zeros({L, H}, f64);
  mass.value_norm = torch::zeros({L, H}, f64);
  SINKLM_ASSERT(trigger.empty() || trigger.size() == segments.size(), "one query class list per segment");
  if (!trigger.empty()) mass.sink_trigger = torch::zeros({L, H}, f64), mass.sink_other = torch::zeros({L, H}, f64);
  for (int64_t l = 0; map_tokens > 0 && l < L; ++l) mass.maps.push_back(torch::zeros({map_tokens, map_tokens}, f64));  // one tensor per layer
  mass.statistic_specs = sink_mode_spec(c.sink_mode).statistics;
  mass.statistics.assign(mass.statistic_specs.size(), torch::Tensor());
  for (auto& t : mass.statistics) t = torch::zeros({L, H}, f64);
  const torch::Device device = model->embed_out->weight.device();
  for (size_t segment = 0; segment < segments.size(); ++segment) {
    const auto& ids = segments[segment];
    SINKLM_ASSERT(static_cast<int64_t>(ids.size()) == T, "segments of different lengths");
    SINKLM_ASSERT(trigger.empty() || static_cast<int64_t>(trigger[segment].size()) == T, "one query class per position");
    torch::Tensor far_trigger;  // [Q] float64, 1 at the far queries of the trigger class
    if (!trigger.empty()) {
      const std::vector<bool>& classes = trigger[segment];
      far_trigger = torch::tensor(std::vector<double>(classes.begin() + mass.far, classes.end()), torch::kFloat64);
      const int64_t triggers = static_cast<int64_t>(far_trigger.sum().item<double>());
      mass.trigger_queries += triggers, mass.other_queries += T - mass.far - triggers;
    }
    auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);
    const AttentionRecord record = record_attention(model, input);
    for (int64_t l = 0; l < L; ++l) {
      const torch::Tensor p = record.probabilities[l].to(torch::kFloat64);  // [H, T, T]
      const torch::Tensor far_rows = p.narrow(1, mass.far, T - mass.far);  // [H, Q, T]
      const torch::Tensor per_query = sink_attention_mass(c, far_rows);  // [H, Q]
      mass.sink[l] += per_query.mean(1);
      if (far_trigger.defined()) add_by_class(mass, l, per_query, far_trigger);
      mass.sink_value_norm[l] += sink_value_norm(c, record, l).to(torch::kFloat64);
      mass.value_norm[l] += record.value_norms[l].narrow(1, sinks, T - sinks).mean(1).to(torch::kFloat64);
      mass.first_positions[l] += far_rows.narrow(2, sinks, first).mean(1);
      mass.key0[l] += p.select(2, 0).mean(1);
      if (map_tokens > 0) mass.maps[l] += p.narrow(1, 0, map_tokens).narrow(2, 0, map_tokens).mean(0);
      const LayerObservation observed{p, record.gates.empty() ? torch::Tensor() : record.gates[l].to(torch::kFloat64), mass.far};
      for (size_t s = 0; s < mass.statistics.size(); ++s) mass.statistics[s][l] += mass.statistic_specs[s].per_head(observed);
    }
  }
  const double n = static_cast<double>(segments.size());
  for (auto* t : {&mass.sink, &mass.first_positions, &mass.key0, &mass.sink_value_norm, &mass.value_norm}) *t /= n;
  if (!trigger.empty()) {
    mass.sink_trigger /= static_cast<double>(std::max<int64_t>(mass.trigger_queries, 1));
    mass.sink_other /= static_cast<double>(std::max<int64_t>(mass.other_queries, 1));
  }
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
