#include "model/attention_probe.h"

#include <torch/torch.h>

#include "core/error.h"
#include "model/attention.h"

namespace sinklm {

std::vector<torch::Tensor> attention_probabilities(GPTNeoXForCausalLM& model, const torch::Tensor& ids) {
  SINKLM_ASSERT(ids.dim() == 2 && ids.size(0) == 1, "ids must be [1, T]");
  c10::InferenceMode inference;
  const ModelConfig& c = model->config();
  const int64_t T = ids.size(1), H = c.num_heads, D = c.head_dim();
  RotaryEmbedding rotary(c.rotary_dims(), c.rotary_base);
  auto [cos, sin] = rotary.cos_sin(torch::arange(T, ids.options()));
  std::vector<torch::Tensor> out;
  auto x = model->gpt_neox->embed_in(ids);  // [1, T, C]
  for (const auto& module : *model->gpt_neox->layers) {
    auto layer = module->as<GPTNeoXLayer>();
    auto& attention = layer->attention;
    // As GPTNeoXAttention::forward: rows of query_key_value grouped per head as [q, k, v].
    auto qkv = attention->query_key_value(layer->input_layernorm(x)).view({1, T, H, 3 * D}).permute({0, 2, 1, 3});
    auto q = apply_rotary(qkv.narrow(-1, 0, D), cos, sin);
    auto k = apply_rotary(qkv.narrow(-1, D, D), cos, sin);
    out.push_back(causal_attention_probabilities(q, k, attention->sink_logit_or_undefined())[0].cpu());  // [H, T, T]
    x = layer->forward(x, cos, sin);
  }
  return out;
}

}  // namespace sinklm
