#include "eval/sinks/sink_interventions.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/attention/attention.h"
#include "model/attention/attention_backend.h"
#include "model/sink.h"

namespace sinklm {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Causal attention in which keys 0 .. masked-1 are hidden from queries masked .. T-1 (the queries before
// them keep them: query 0 must attend to something); a sink column is dropped, its normaliser kept.
class SinkMaskingAttention : public CausalAttention {
 public:
  SinkMaskingAttention(const RotaryEmbedding& rotary, const torch::Tensor& positions, int64_t masked)
      : CausalAttention(rotary, positions, AttentionImpl::Reference), masked_(masked) {}

  torch::Tensor attend(int64_t, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SinkColumn& sink) override {
    SinkColumn no_column;
    no_column.normaliser = sink.normaliser;
    const int64_t T = q.size(2);
    auto rows = torch::arange(T).unsqueeze(1), cols = torch::arange(T).unsqueeze(0);
    auto hidden = (cols < masked_).logical_and(rows >= masked_);  // [T, T]
    auto probs = causal_attention_probabilities(apply_rotary(q, cos_, sin_), apply_rotary(k, cos_, sin_), no_column, hidden);
    return torch::matmul(probs, v.to(torch::kFloat32)).to(q.scalar_type());
  }
  torch::Tensor attend_packed(int64_t layer, const torch::Tensor& qkv, const SinkColumn& sink) override {
    return AttentionBackend::attend_packed(layer, qkv, sink);
  }

 private:
  int64_t masked_;
};

// [T - 1] float64: the NLL of ids[t + 1] at each position t.
torch::Tensor next_token_nll(GPTNeoXForCausalLM& model, const std::vector<int64_t>& ids, AttentionBackend* backend) {
  const torch::Device device = model->embed_out->weight.device();
  auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);  // [1, T]
  auto hidden = backend ? model->hidden_states(input, *backend) : model->hidden_states(input);
  auto logits = model->embed_out(hidden[0]).to(torch::kFloat64);            // [T, V]
  auto targets = input[0].narrow(0, 1, input.size(1) - 1);
  return -torch::log_softmax(logits.narrow(0, 0, input.size(1) - 1), -1).gather(1, targets.unsqueeze(1)).squeeze(1).cpu();
}

// Sums of one intervention's far-target NLLs, overall and per class.
struct LossSums {
  double all = 0, trigger = 0, other = 0;
  LossSums& operator+=(const LossSums& o) {
    all += o.all, trigger += o.trigger, other += o.other;
    return *this;
  }
  InterventionLoss mean(int64_t targets, int64_t triggers, bool classes) const {
    if (targets == 0) return {kNaN, kNaN, kNaN};
    return {all / targets, classes && triggers ? trigger / triggers : kNaN,
            classes && targets > triggers ? other / (targets - triggers) : kNaN};
  }
};

// Adds nll[q - shift] for the far queries q = far .. T-2.
void add_far(LossSums& sums, const torch::Tensor& nll, int64_t far, int64_t T, int64_t shift, const std::vector<bool>* trigger) {
  auto values = nll.contiguous();
  const double* p = values.data_ptr<double>();
  for (int64_t q = far; q < T - 1; ++q) {
    sums.all += p[q - shift];
    if (trigger) ((*trigger)[q] ? sums.trigger : sums.other) += p[q - shift];
  }
}

}  // namespace

SinkInterventions intervene_on_sink(GPTNeoXForCausalLM& model, const std::vector<std::vector<int64_t>>& segments,
                                    int64_t sinks, int64_t substitute, const std::vector<std::vector<bool>>& trigger) {
  SINKLM_ASSERT(!segments.empty() && (trigger.empty() || trigger.size() == segments.size()), "segments and classes");
  const ModelConfig& c = model->config();
  const bool column = sink_site(c.sink_mode) == SinkSite::Column;
  const int64_t T = static_cast<int64_t>(segments[0].size()), far = T / 2;
  SINKLM_ASSERT(sinks >= 1 && sinks < far, "sink positions must lie before the far queries");
  c10::InferenceMode inference;
  SinkInterventions out;
  out.sinks = column ? 0 : sinks;  // a column has no positions
  out.substitute = substitute;
  // Per segment, then summed: the intact model and each intervention.
  struct Sums {
    LossSums intact, evicted, masked, substituted;
    int64_t targets = 0, triggers = 0;
    InterventionLosses means(bool classes, bool column, bool substitutes) const {
      const int64_t positional = column ? 0 : targets;
      return {intact.mean(targets, triggers, classes), evicted.mean(positional, triggers, classes),
              masked.mean(targets, triggers, classes), substituted.mean(substitutes ? positional : 0, triggers, classes)};
    }
  } total;
  const bool classes = !trigger.empty(), substitutes = substitute >= 0;
  auto positions = torch::arange(T, torch::TensorOptions().dtype(torch::kInt64).device(model->embed_out->weight.device()));
  SinkMaskingAttention masking(model->rotary(), positions, column ? 0 : sinks);
  for (size_t s = 0; s < segments.size(); ++s) {
    const auto& ids = segments[s];
    SINKLM_ASSERT(static_cast<int64_t>(ids.size()) == T, "segments of different lengths");
    const std::vector<bool>* segment_classes = classes ? &trigger[s] : nullptr;
    Sums sums;
    for (int64_t q = far; q < T - 1; ++q) sums.targets++, sums.triggers += segment_classes && (*segment_classes)[q];
    add_far(sums.intact, next_token_nll(model, ids, nullptr), far, T, 0, segment_classes);
    add_far(sums.masked, next_token_nll(model, ids, &masking), far, T, 0, segment_classes);
    if (!column) {
      add_far(sums.evicted, next_token_nll(model, {ids.begin() + sinks, ids.end()}, nullptr), far, T, sinks, segment_classes);
      if (substitutes) {
        std::vector<int64_t> swapped = ids;
        std::fill(swapped.begin(), swapped.begin() + sinks, substitute);
        add_far(sums.substituted, next_token_nll(model, swapped, nullptr), far, T, 0, segment_classes);
      }
    }
    out.per_segment.push_back(sums.means(classes, column, substitutes));
    total.intact += sums.intact, total.evicted += sums.evicted, total.masked += sums.masked;
    total.substituted += sums.substituted, total.targets += sums.targets, total.triggers += sums.triggers;
  }
  out.targets = total.targets, out.trigger_targets = total.triggers;
  static_cast<InterventionLosses&>(out) = total.means(classes, column, substitutes);
  return out;
}

}  // namespace sinklm
