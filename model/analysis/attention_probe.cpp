#include "model/analysis/attention_probe.h"

#include <torch/torch.h>

#include "core/error.h"
#include "model/attention/attention.h"

namespace sinklm {
namespace {

// Causal attention that also keeps each layer's probabilities of batch row 0.
class ProbingAttention : public CausalAttention {
 public:
  using CausalAttention::CausalAttention;
  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SinkColumn& sink) override {
    auto rotated_q = apply_rotary(q, cos_, sin_), rotated_k = apply_rotary(k, cos_, sin_);
    SINKLM_ASSERT(static_cast<int64_t>(record.probabilities.size()) == layer, "layers must be probed in order");
    record.probabilities.push_back(causal_attention_probabilities(rotated_q, rotated_k, sink)[0].cpu());  // [H, T, T]
    record.value_norms.push_back(v[0].to(torch::kFloat32).norm(2, -1).cpu());                          // [H, T]
    if (sink.present())
      record.column_value_norms.push_back(sink.value.defined() ? sink.value.to(torch::kFloat32).norm(2, -1).cpu()
                                                               : torch::zeros({q.size(1)}));  // [H]
    return causal_attention(rotated_q, rotated_k, v, sink, impl_);
  }
  // The probe needs q and k after rotary: always through attend().
  torch::Tensor attend_packed(int64_t layer, const torch::Tensor& qkv, const SinkColumn& sink) override {
    return AttentionBackend::attend_packed(layer, qkv, sink);
  }
  void observe_output_gate(int64_t layer, const torch::Tensor& gate) override {
    SINKLM_ASSERT(static_cast<int64_t>(record.gates.size()) == layer, "layers must be probed in order");
    record.gates.push_back(gate[0].to(torch::kFloat32).cpu());  // [T, width]
  }
  AttentionRecord record;
};

}  // namespace

AttentionRecord record_attention(GPTNeoXForCausalLM& model, const torch::Tensor& ids) {
  SINKLM_ASSERT(ids.dim() == 2 && ids.size(0) == 1, "ids must be [1, T]");
  c10::InferenceMode inference;
  ProbingAttention probe(model->rotary(), torch::arange(ids.size(1), ids.options()), model->config().attention);
  model->hidden_states(ids, probe);
  return std::move(probe.record);
}

}  // namespace sinklm
