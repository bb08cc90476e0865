#include "model/sink.h"

#include <torch/torch.h>

#include "core/ends_with.h"
#include "core/config.h"
#include "core/error.h"
#include "model/model_config.h"

namespace sinklm {
namespace {

// In the schema's order of model.sink.mode's choices.
constexpr SinkMode kModes[] = {SinkMode::None, SinkMode::Token, SinkMode::Softmax1, SinkMode::Logit};

const std::vector<std::string>& schema_names() {
  const KeySpec* spec = find_key_spec("model.sink.mode");
  SINKLM_ASSERT(spec && spec->choices.size() == std::size(kModes), "model.sink.mode's choices and SinkMode differ");
  return spec->choices;
}

}  // namespace

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

bool is_sink_parameter(const std::string& name) {
  return ends_with(name, "sink_logit");
}

int64_t default_cache_sinks(const ModelConfig& model) {
  return model.sink_mode == SinkMode::Token ? model.sink_count : 4;
}

bool has_sink_column(SinkMode mode) { return mode == SinkMode::Softmax1 || mode == SinkMode::Logit; }

SinkSite sink_site(SinkMode mode) {
  if (mode == SinkMode::Token) return SinkSite::Tokens;
  return has_sink_column(mode) ? SinkSite::Column : SinkSite::FirstPosition;
}

const char* sink_site_name(SinkSite site) {
  switch (site) {
    case SinkSite::FirstPosition: return "position 0";
    case SinkSite::Tokens: return "sink token";
    case SinkSite::Column: return "sink logit";
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

torch::Tensor softmax_with_sink(const torch::Tensor& scores, const torch::Tensor& sink_logit) {
  if (!sink_logit.defined()) return torch::softmax(scores, -1);
  // The sink addend of the denominator, written as one more column so the max-subtraction covers it too.
  const int64_t H = sink_logit.size(0);
  auto shape = scores.sizes().vec();
  shape.back() = 1;
  std::vector<int64_t> view(scores.dim(), 1);
  view[scores.dim() - 3] = H;  // [..., H, 1, 1]
  auto column = sink_logit.to(scores.scalar_type()).view(view).expand(shape);
  return torch::softmax(torch::cat({scores, column}, -1), -1).narrow(-1, 0, scores.size(-1));
}

}  // namespace sinklm
