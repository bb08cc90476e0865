#include "model/sink.h"

#include <torch/torch.h>

#include <cmath>

#include "core/config/config.h"
#include "core/error.h"
#include "model/model_config.h"

namespace sinklm {
namespace {

// --- the pieces rows share ---

std::vector<SinkParameterSpec> no_parameters(const ModelConfig&) { return {}; }
int64_t no_gate(const ModelConfig&) { return 0; }
// StreamingLLM's choice for a model that was not trained with sink tokens.
int64_t four_cache_sinks(const ModelConfig&) { return 4; }
SinkColumn no_column(const ModelConfig&, const std::vector<torch::Tensor>&, const torch::Tensor&) { return {}; }

// The gates of a layer, [T, H, width / H], each head's together.
torch::Tensor gates_per_head(const LayerObservation& layer) {
  const int64_t T = layer.gate.size(0), H = layer.probabilities.size(0);
  return layer.gate.view({T, H, -1});
}

std::vector<SinkStatistic> gate_statistics() {
  return {
    {"gate_mean", "mean gate", "mean output gate, over every position",
     [](const LayerObservation& l) { return gates_per_head(l).mean(std::vector<int64_t>{0, 2}); }},
    {"gate_dormant", "dormant by gate", "fraction of output gates below 0.1 (\"dormant by gate\")",
     [](const LayerObservation& l) {
       return gates_per_head(l).lt(kDormantGate).to(torch::kFloat64).mean(std::vector<int64_t>{0, 2});
     }},
  };
}

// What a rectified row leaves unassigned: 1 - sum_j p_ij over the far queries (softmax rows sum to 1).
std::vector<SinkStatistic> softpick_statistics() {
  return {
    {"unassigned", "mass given to no key", "1 - sum of a query's attention, mean over the far queries",
     [](const LayerObservation& l) {
       const int64_t T = l.probabilities.size(1);
       return (1 - l.probabilities.narrow(1, l.far, T - l.far).sum(-1)).mean(1);
     }},
  };
}

// --- the table: one row per mode, in model.sink.mode's order of choices ---

const std::vector<SinkModeSpec>& table() {
  static const std::vector<SinkModeSpec> rows = {
      {SinkMode::None, "none", "vanilla", [](const ModelConfig&) { return std::string("none (vanilla softmax attention)"); },
       no_parameters, no_column, no_gate, SinkSite::FirstPosition, four_cache_sinks, /*loads_in_transformers=*/true, {}},
      {SinkMode::Token, "token", "learnable sink token(s)",
       [](const ModelConfig& c) {
         std::string ids;
         for (int64_t id : sink_prefix(c)) ids += (ids.empty() ? "" : ",") + std::to_string(id);
         return "token: " + std::to_string(c.sink_count) + " learnable sink token(s), id " + ids +
                ", first in every sample and stream; 1 sink slot per token when streaming";
       },
       no_parameters, no_column, no_gate, SinkSite::Tokens,
       // Exactly the model's sink tokens: it was trained with that many.
       [](const ModelConfig& c) { return c.sink_count; }, true, {}},
      {SinkMode::Softmax1, "softmax1", "zero sink",
       [](const ModelConfig&) { return std::string("softmax1: zero sink, exp(x_i) / (1 + sum_j exp(x_j))"); },
       no_parameters,
       [](const ModelConfig& c, const std::vector<torch::Tensor>&, const torch::Tensor& like) {
         return SinkColumn{torch::zeros({c.num_heads}, like.options())};
       },
       no_gate, SinkSite::Column, four_cache_sinks, false, {}},
      {SinkMode::Logit, "logit", "learned per-head sink logit",
       [](const ModelConfig&) {
         return std::string("logit: one learned sink logit per head and layer (extra softmax column)");
       },
       [](const ModelConfig& c) { return std::vector<SinkParameterSpec>{{"sink_logit", {c.num_heads}}}; },
       [](const ModelConfig&, const std::vector<torch::Tensor>& p, const torch::Tensor&) {
         SINKLM_ASSERT(p.size() == 1, "mode logit: one sink parameter per layer (sink_parameters)");
         return SinkColumn{p[0]};
       },
       no_gate, SinkSite::Column, four_cache_sinks, false, {}},
      {SinkMode::KeyValue, "kv", "learned sink key and value per head (explicit attention bias)",
       [](const ModelConfig& c) {
         return std::string("kv: a learned sink key and value per head and layer (extra softmax column, logit "
                            "q.k/sqrt(D)); init ") + (c.sink_kv_init == SinkInit::Normal ? "normal" : "zero");
       },
       [](const ModelConfig& c) {
         const int64_t H = c.num_heads, D = c.head_dim();
         return std::vector<SinkParameterSpec>{{"sink_key", {H, D}, c.sink_kv_init}, {"sink_value", {H, D}, c.sink_kv_init}};
       },
       [](const ModelConfig& c, const std::vector<torch::Tensor>& p, const torch::Tensor& like) {
         SINKLM_ASSERT(p.size() == 2, "mode kv: a sink key and value per layer (sink_parameters)");
         return SinkColumn{torch::zeros({c.num_heads}, like.options()), p[0], p[1]};
       },
       no_gate, SinkSite::Column, four_cache_sinks, false, {}},
      {SinkMode::Gated, "gated", "sigmoid gate on each head's output (gated attention)",
       [](const ModelConfig& c) {
         return std::string("gated: sigmoid gate on each head's output, ") +
                (c.sink_gate_elementwise ? "elementwise (one per output element)" : "headwise (one per head)");
       },
       no_parameters, no_column,
       [](const ModelConfig& c) { return c.sink_gate_elementwise ? c.hidden_size : c.num_heads; },
       SinkSite::FirstPosition, four_cache_sinks, false, gate_statistics()},
      {SinkMode::Softpick, "softpick", "rectified softmax, no sink by construction (softpick)",
       [](const ModelConfig&) {
         return std::string("softpick: ReLU(exp(x_i) - 1) / sum_j |exp(x_j) - 1| instead of softmax (rows may sum to "
                            "less than 1; no sink by construction)");
       },
       no_parameters,
       [](const ModelConfig&, const std::vector<torch::Tensor>&, const torch::Tensor&) {
         SinkColumn column;
         column.normaliser = softpick;
         return column;
       },
       no_gate, SinkSite::FirstPosition, four_cache_sinks, false, softpick_statistics()},
  };
  return rows;
}

// model.sink.mode's choices and help are the table's names and summaries, filled in when this library is
// linked in (core/config/config.h: provide_choices).
[[maybe_unused]] const bool kSchemaChoices = [] {
  std::vector<std::pair<std::string, std::string>> choices;
  for (const auto& row : table()) choices.emplace_back(row.name, row.summary);
  provide_choices("model.sink.mode", choices);
  return true;
}();

}  // namespace

const std::vector<SinkModeSpec>& sink_mode_table() { return table(); }

const SinkModeSpec& sink_mode_spec(SinkMode mode) {
  for (const auto& row : table())
    if (row.mode == mode) return row;
  SINKLM_ASSERT(false, "SinkMode ", static_cast<int>(mode), " has no row in the table");
}

const std::vector<SinkMode>& all_sink_modes() {
  static const std::vector<SinkMode> modes = [] {
    std::vector<SinkMode> out;
    for (const auto& row : table()) out.push_back(row.mode);
    return out;
  }();
  return modes;
}

SinkMode parse_sink_mode(const std::string& name) {
  for (const auto& row : table())
    if (row.name == name) return row.mode;
  fail("model.sink.mode: unknown sink mode '", name, "'");
}

const char* sink_mode_name(SinkMode mode) { return sink_mode_spec(mode).name; }

std::string sink_mode_description(const ModelConfig& c) { return sink_mode_spec(c.sink_mode).describe(c); }

std::vector<int64_t> sink_prefix(const ModelConfig& model) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < model.sink_count; ++i) ids.push_back(model.sink_token_id(i));
  return ids;
}

int64_t sink_prefix_length(const ModelConfig& model) { return model.sink_count; }

std::vector<int64_t> with_sink_prefix(const ModelConfig& model, const std::vector<int64_t>& ids) {
  std::vector<int64_t> out = sink_prefix(model);
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

std::vector<SinkParameterSpec> sink_parameters(const ModelConfig& model) {
  return sink_mode_spec(model.sink_mode).parameters(model);
}

int64_t sink_parameter_count(const ModelConfig& model) {
  int64_t count = 0;
  for (const auto& spec : sink_parameters(model)) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    count += n;
  }
  const int64_t gate = output_gate_width(model);
  return count + gate * model.hidden_size + gate;
}

int64_t output_gate_width(const ModelConfig& model) { return sink_mode_spec(model.sink_mode).output_gate_width(model); }

torch::Tensor apply_output_gate(const torch::Tensor& attended, const torch::Tensor& gate, int64_t heads) {
  const int64_t B = attended.size(0), T = attended.size(1), width = gate.size(-1);
  if (width == attended.size(-1)) return attended * gate;                    // elementwise
  SINKLM_ASSERT(width == heads, "output gate: width ", width, " is neither H nor H * D");
  return (attended.view({B, T, heads, -1}) * gate.unsqueeze(-1)).view_as(attended);  // [B, T, H, D] * [B, T, H, 1]
}

bool loads_in_transformers(SinkMode mode) { return sink_mode_spec(mode).loads_in_transformers; }

SinkColumn SinkColumn::to(torch::ScalarType dtype) const {
  auto cast = [&](const torch::Tensor& t) { return t.defined() ? t.to(dtype) : t; };
  return {cast(logit), cast(key), cast(value), normaliser};
}

SinkColumn sink_column(const ModelConfig& model, const std::vector<torch::Tensor>& parameters,
                       const torch::Tensor& like) {
  // Called per layer and forward (the decode step too): each row checks only what it reads.
  return sink_mode_spec(model.sink_mode).column(model, parameters, like);
}

int64_t default_cache_sinks(const ModelConfig& model) { return sink_mode_spec(model.sink_mode).default_cache_sinks(model); }

SinkSite sink_site(SinkMode mode) { return sink_mode_spec(mode).site; }

const char* sink_site_name(SinkSite site) {
  switch (site) {
    case SinkSite::FirstPosition: return "position 0";
    case SinkSite::Tokens: return "sink token";
    case SinkSite::Column: return "sink column";
  }
  SINKLM_ASSERT(false, "unhandled SinkSite");
}

torch::Tensor sink_attention_mass(const ModelConfig& model, const torch::Tensor& probs) {
  switch (sink_site(model.sink_mode)) {
    case SinkSite::Tokens: return probs.narrow(-1, 0, sink_prefix_length(model)).sum(-1);
    case SinkSite::Column: return 1 - probs.sum(-1);  // what the dropped column absorbed
    case SinkSite::FirstPosition: return probs.select(-1, 0);
  }
  SINKLM_ASSERT(false, "unhandled SinkSite");
}

namespace {

// `t` [H, ...] viewed to broadcast against [..., H, Tq, X] tensors of rank `rank`.
torch::Tensor per_head(const torch::Tensor& t, int64_t rank) {
  std::vector<int64_t> view(rank, 1);
  view[rank - 3] = t.size(0);
  if (t.dim() == 2) view[rank - 1] = t.size(1);
  return t.view(view);
}

}  // namespace

torch::Tensor sink_column_logits(const SinkColumn& column, int64_t rank, torch::ScalarType dtype, const torch::Tensor& q) {
  auto logits = per_head(column.logit.to(dtype), rank);  // [..., H, 1, 1]
  if (!column.key.defined()) return logits;
  SINKLM_ASSERT(q.defined() && q.dim() == rank, "a sink column with a key needs the queries");
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto key = per_head(column.key.to(dtype), rank);  // [..., H, 1, D]
  return logits + (q.to(dtype) * key).sum(-1, /*keepdim=*/true) * scale;  // [..., H, Tq, 1]
}

torch::Tensor softmax_with_sink(const torch::Tensor& scores, const SinkColumn& column, const torch::Tensor& q) {
  if (column.normaliser) return column.normaliser(scores);
  if (!column.present()) return torch::softmax(scores, -1);
  SINKLM_ASSERT(!column.key.defined() || (q.defined() && q.size(-2) == scores.size(-2)),
                "a sink column with a key needs the queries, one per score row");
  // The sink addend of the denominator, written as one more column so the max-subtraction covers it too.
  auto shape = scores.sizes().vec();
  shape.back() = 1;
  auto logits = sink_column_logits(column, scores.dim(), scores.scalar_type(), q).expand(shape);  // [..., H, Tq, 1]
  return torch::softmax(torch::cat({scores, logits}, -1), -1).narrow(-1, 0, scores.size(-1));
}

torch::Tensor sink_value_output(const torch::Tensor& probs, const SinkColumn& column) {
  if (!column.value.defined()) return {};
  auto on_sink = 1 - probs.to(torch::kFloat32).sum(-1, /*keepdim=*/true);  // [..., H, Tq, 1]
  return on_sink * per_head(column.value.to(torch::kFloat32), probs.dim());
}

torch::Tensor softpick(const torch::Tensor& scores) {
  constexpr double kEpsilon = 1e-6;
  const auto visible = scores.isneginf().logical_not();                         // [..., Tk]
  const auto m = std::get<0>(scores.max(-1, /*keepdim=*/true)).clamp_min(0);  // [..., 1], >= 0: e^-m <= 1
  const auto floor = torch::exp(-m);                                            // e^-m
  const auto shifted = torch::exp(scores - m) - floor;                          // (e^s - 1) e^-m
  const auto denominator = torch::where(visible, shifted.abs(), torch::zeros_like(shifted)).sum(-1, true) + kEpsilon * floor;
  return torch::relu(shifted) / denominator;
}

}  // namespace sinklm
