#include "model/sink.h"

#include <torch/torch.h>

#include <cmath>

#include "core/config.h"
#include "core/ends_with.h"
#include "core/error.h"
#include "model/model_config.h"

namespace sinklm {
namespace {

// In the schema's order of model.sink.mode's choices.
constexpr SinkMode kModes[] = {SinkMode::None,  SinkMode::Token,    SinkMode::Softmax1,
                               SinkMode::Logit, SinkMode::KeyValue, SinkMode::Gated};

const std::vector<std::string>& schema_names() {
  const KeySpec* spec = find_key_spec("model.sink.mode");
  SINKLM_ASSERT(spec && spec->choices.size() == std::size(kModes), "model.sink.mode's choices and SinkMode differ");
  return spec->choices;
}

}  // namespace

const std::vector<SinkMode>& all_sink_modes() {
  static const std::vector<SinkMode> modes(std::begin(kModes), std::end(kModes));
  return modes;
}

SinkMode parse_sink_mode(const std::string& name) {
  const auto& names = schema_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return kModes[i];
  fail("model.sink.mode: unknown sink mode '", name, "'");
}

const char* sink_mode_name(SinkMode mode) {
  const auto& names = schema_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (kModes[i] == mode) return names[i].c_str();
  SINKLM_ASSERT(false, "unhandled SinkMode");
}

std::string sink_mode_description(const ModelConfig& c) {
  switch (c.sink_mode) {
    case SinkMode::None: return "none (vanilla softmax attention)";
    case SinkMode::Token: {
      std::string ids;
      for (int64_t id : sink_prefix(c)) ids += (ids.empty() ? "" : ",") + std::to_string(id);
      return "token: " + std::to_string(c.sink_count) + " learnable sink token(s), id " + ids +
             ", first in every sample and stream; 1 sink slot per token when streaming";
    }
    case SinkMode::Softmax1: return "softmax1: zero sink, exp(x_i) / (1 + sum_j exp(x_j))";
    case SinkMode::Logit: return "logit: one learned sink logit per head and layer (extra softmax column)";
    case SinkMode::KeyValue:
      return std::string("kv: a learned sink key and value per head and layer (extra softmax column, logit q.k/sqrt(D)); "
                         "init ") + (c.sink_kv_init == SinkInit::Normal ? "normal" : "zero");
    case SinkMode::Gated:
      return std::string("gated: sigmoid gate on each head's output, ") +
             (c.sink_gate_elementwise ? "elementwise (one per output element)" : "headwise (one per head)");
  }
  SINKLM_ASSERT(false, "unhandled SinkMode");
}

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
  const int64_t H = model.num_heads, D = model.head_dim();
  switch (model.sink_mode) {
    case SinkMode::Logit: return {{"sink_logit", {H}}};
    case SinkMode::KeyValue: return {{"sink_key", {H, D}, model.sink_kv_init}, {"sink_value", {H, D}, model.sink_kv_init}};
    default: return {};
  }
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

bool is_sink_parameter(const std::string& name) {
  // Every mode's parameter names (sink_parameters): a name is checked without knowing the mode.
  return ends_with(name, "sink_logit") || ends_with(name, "sink_key") || ends_with(name, "sink_value");
}

int64_t output_gate_width(const ModelConfig& model) {
  if (model.sink_mode != SinkMode::Gated) return 0;
  return model.sink_gate_elementwise ? model.hidden_size : model.num_heads;
}

torch::Tensor apply_output_gate(const torch::Tensor& attended, const torch::Tensor& gate, int64_t heads) {
  const int64_t B = attended.size(0), T = attended.size(1), width = gate.size(-1);
  if (width == attended.size(-1)) return attended * gate;                    // elementwise
  SINKLM_ASSERT(width == heads, "output gate: width ", width, " is neither H nor H * D");
  return (attended.view({B, T, heads, -1}) * gate.unsqueeze(-1)).view_as(attended);  // [B, T, H, D] * [B, T, H, 1]
}

bool loads_in_transformers(SinkMode mode) { return mode == SinkMode::None || mode == SinkMode::Token; }

SinkColumn SinkColumn::to(torch::ScalarType dtype) const {
  auto cast = [&](const torch::Tensor& t) { return t.defined() ? t.to(dtype) : t; };
  return {cast(logit), cast(key), cast(value)};
}

SinkColumn sink_column(const ModelConfig& model, const std::vector<torch::Tensor>& parameters,
                       const torch::Tensor& like) {
  // Called per layer and forward (the decode step too): each case checks only what it reads.
  switch (model.sink_mode) {
    case SinkMode::None:
    case SinkMode::Token: return {};
    case SinkMode::Softmax1: return {torch::zeros({model.num_heads}, like.options())};
    case SinkMode::Logit:
      SINKLM_ASSERT(parameters.size() == 1, "mode logit: one sink parameter per layer (sink_parameters)");
      return {parameters[0]};
    case SinkMode::KeyValue:
      SINKLM_ASSERT(parameters.size() == 2, "mode kv: a sink key and value per layer (sink_parameters)");
      return {torch::zeros({model.num_heads}, like.options()), parameters[0], parameters[1]};
    case SinkMode::Gated: return {};
  }
  SINKLM_ASSERT(false, "unhandled SinkMode");
}

int64_t default_cache_sinks(const ModelConfig& model) {
  return model.sink_mode == SinkMode::Token ? model.sink_count : 4;
}

bool has_sink_column(SinkMode mode) {
  return mode == SinkMode::Softmax1 || mode == SinkMode::Logit || mode == SinkMode::KeyValue;
}

SinkSite sink_site(SinkMode mode) {
  if (mode == SinkMode::Token) return SinkSite::Tokens;
  return has_sink_column(mode) ? SinkSite::Column : SinkSite::FirstPosition;
}

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

torch::Tensor softmax_with_sink(const torch::Tensor& scores, const SinkColumn& column, const torch::Tensor& q) {
  if (!column.present()) return torch::softmax(scores, -1);
  // The sink addend of the denominator, written as one more column so the max-subtraction covers it too.
  const int64_t rank = scores.dim();
  auto shape = scores.sizes().vec();
  shape.back() = 1;
  auto logits = per_head(column.logit.to(scores.scalar_type()), rank).expand(shape);  // [..., H, Tq, 1]
  if (column.key.defined()) {
    SINKLM_ASSERT(q.defined() && q.size(-2) == scores.size(-2), "a sink column with a key needs the queries");
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    auto key = per_head(column.key.to(scores.scalar_type()), rank);  // [..., H, 1, D]
    logits = logits + (q.to(scores.scalar_type()) * key).sum(-1, /*keepdim=*/true) * scale;
  }
  return torch::softmax(torch::cat({scores, logits}, -1), -1).narrow(-1, 0, scores.size(-1));
}

torch::Tensor sink_value_output(const torch::Tensor& probs, const SinkColumn& column) {
  if (!column.value.defined()) return {};
  auto on_sink = 1 - probs.to(torch::kFloat32).sum(-1, /*keepdim=*/true);  // [..., H, Tq, 1]
  return on_sink * per_head(column.value.to(torch::kFloat32), probs.dim());
}

}  // namespace sinklm
