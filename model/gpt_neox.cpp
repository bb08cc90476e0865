#include "model/gpt_neox.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>

#include "core/ends_with.h"
#include "core/error.h"
#include "model/activation_checkpoint.h"

namespace sinklm {
namespace {

torch::nn::LayerNorm layer_norm(const ModelConfig& c) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps));
}

}  // namespace

GPTNeoXAttentionImpl::GPTNeoXAttentionImpl(const ModelConfig& c) : config_(c) {
  query_key_value = register_module("query_key_value", Projection(c.hidden_size, 3 * c.hidden_size));
  dense = register_module("dense", Projection(c.hidden_size, c.hidden_size));
  for (const auto& spec : sinklm::sink_parameters(c))
    sink_parameters.push_back(register_parameter(spec.name, torch::zeros(spec.shape)));
  if (const int64_t width = output_gate_width(c)) gate = register_module("gate", Projection(c.hidden_size, width));
}

SinkColumn GPTNeoXAttentionImpl::sink_column() const {
  // The bias: float32 (and on the model's device) in every weight format (model/projection.h).
  return sinklm::sink_column(config_, sink_parameters, dense->bias);
}

torch::Tensor GPTNeoXAttentionImpl::forward(const torch::Tensor& x, AttentionBackend& backend, int64_t layer) {
  const int64_t B = x.size(0), T = x.size(1);
  auto qkv = query_key_value->forward_in_product_dtype(x).view({B, T, config_.num_heads, 3 * config_.head_dim()});  // [B, T, H, 3D]
  auto attended = backend.attend_packed(layer, qkv, sink_column());                          // [B, T, H * D]
  if (gate) {
    auto g = torch::sigmoid(gate->forward_in_product_dtype(x));  // [B, T, width]
    backend.observe_output_gate(layer, g);
    attended = apply_output_gate(attended, g, config_.num_heads);
  }
  return dense->forward_in_product_dtype(attended);  // [B, T, C]
}

GPTNeoXMLPImpl::GPTNeoXMLPImpl(const ModelConfig& c) {
  dense_h_to_4h = register_module("dense_h_to_4h", Projection(c.hidden_size, c.intermediate_size));
  dense_4h_to_h = register_module("dense_4h_to_h", Projection(c.intermediate_size, c.hidden_size));
}

torch::Tensor GPTNeoXMLPImpl::forward(const torch::Tensor& x) {
  using Activation = ProjectionImpl::Activation;
  return dense_4h_to_h->forward_in_product_dtype(dense_h_to_4h->forward_in_product_dtype(x, Activation::Gelu));
}

GPTNeoXLayerImpl::GPTNeoXLayerImpl(const ModelConfig& c) : parallel_residual_(c.parallel_residual) {
  input_layernorm = register_module("input_layernorm", layer_norm(c));
  post_attention_layernorm = register_module("post_attention_layernorm", layer_norm(c));
  attention = register_module("attention", GPTNeoXAttention(c));
  mlp = register_module("mlp", GPTNeoXMLP(c));
}

torch::Tensor GPTNeoXLayerImpl::forward(const torch::Tensor& x, AttentionBackend& backend, int64_t layer) {
  auto attended = attention->forward(input_layernorm(x), backend, layer);
  if (parallel_residual_) return x + attended + mlp(post_attention_layernorm(x));
  auto h = x + attended;
  return h + mlp(post_attention_layernorm(h));
}

GPTNeoXModelImpl::GPTNeoXModelImpl(const ModelConfig& c) {
  embed_in = register_module("embed_in", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_layers; ++i) layers->push_back(GPTNeoXLayer(c));
  final_layer_norm = register_module("final_layer_norm", layer_norm(c));
}

GPTNeoXForCausalLMImpl::GPTNeoXForCausalLMImpl(const ModelConfig& c, InitialWeights weights)
    : config_(c), rotary_(c.rotary_dims(), c.rotary_base), sink_parameter_specs_(sinklm::sink_parameters(c)) {
  gpt_neox = register_module("gpt_neox", GPTNeoXModel(c));
  embed_out = register_module("embed_out", Projection(torch::nn::LinearOptions(c.hidden_size, c.vocab_size).bias(false)));
  if (weights == InitialWeights::Drawn) initialize();
}

torch::Tensor GPTNeoXForCausalLMImpl::hidden_states(const torch::Tensor& input_ids, const torch::Tensor& positions) {
  auto pos = positions.defined() ? positions
                                 : torch::arange(input_ids.size(1), torch::TensorOptions().dtype(torch::kInt64).device(input_ids.device()));
  if (!activation_checkpointing_ || !torch::GradMode::is_enabled()) {
    CausalAttention backend(rotary_, pos, config_.attention);
    return hidden_states(input_ids, backend);
  }
  // Each layer runs again inside backward: the backend it attends with must outlive this call.
  auto backend = std::make_shared<CausalAttention>(rotary_, pos, config_.attention);
  return run_layers(input_ids, [&](int64_t index, const torch::Tensor& x) {
    auto layer = gpt_neox->layers->ptr<GPTNeoXLayerImpl>(index);
    return recompute_in_backward([layer, backend, index](const torch::Tensor& h) { return layer->forward(h, *backend, index); }, x);
  });
}

torch::Tensor GPTNeoXForCausalLMImpl::hidden_states(const torch::Tensor& input_ids, AttentionBackend& backend) {
  return run_layers(input_ids, [&](int64_t index, const torch::Tensor& x) {
    return gpt_neox->layers->ptr<GPTNeoXLayerImpl>(index)->forward(x, backend, index);
  });
}

torch::Tensor GPTNeoXForCausalLMImpl::run_layers(const torch::Tensor& input_ids, const LayerStep& layer_step) {
  SINKLM_ASSERT(input_ids.dim() == 2, "input_ids must be [B, T]");
  auto x = gpt_neox->embed_in(input_ids);  // [B, T, C]
  for (int64_t index = 0; index < static_cast<int64_t>(gpt_neox->layers->size()); ++index) x = layer_step(index, x);
  return gpt_neox->final_layer_norm(x);
}

torch::Tensor GPTNeoXForCausalLMImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& positions) {
  return embed_out(hidden_states(input_ids, positions));  // [B, T, V]
}

std::vector<SinkParameter> GPTNeoXForCausalLMImpl::sink_parameters() const {
  std::vector<SinkParameter> out;
  for (size_t layer = 0; layer < gpt_neox->layers->size(); ++layer) {
    const auto& tensors = gpt_neox->layers->ptr<GPTNeoXLayerImpl>(layer)->attention->sink_parameters;
    for (size_t i = 0; i < tensors.size(); ++i) out.push_back({tensors[i], &sink_parameter_specs_[i]});
  }
  return out;
}

const SinkParameterSpec* sink_parameter_spec(const torch::Tensor& parameter, const std::vector<SinkParameter>& sink_parameters) {
  for (const SinkParameter& sink : sink_parameters)
    if (sink.tensor.is_same(parameter)) return sink.spec;
  return nullptr;
}

const SinkParameterSpec* GPTNeoXForCausalLMImpl::sink_parameter_spec(const torch::Tensor& parameter) const {
  return sinklm::sink_parameter_spec(parameter, sink_parameters());
}

void GPTNeoXForCausalLMImpl::initialize() {
  torch::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(config_.init_seed));
  const double small = std::sqrt(2.0 / (5.0 * config_.hidden_size));
  const double wang = 2.0 / (config_.num_layers * std::sqrt(static_cast<double>(config_.hidden_size)));
  const std::vector<SinkParameter> sinks = sink_parameters();
  // Parameters are drawn on the CPU in name order, so a model is identical whatever device it lives on.
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    torch::Tensor value = torch::empty(p.sizes(), torch::kFloat32);
    if (name.find("layernorm") != std::string::npos || name.find("layer_norm") != std::string::npos) {
      value.fill_(ends_with(name, ".weight") ? 1.0 : 0.0);
    } else if (const SinkParameterSpec* spec = sinklm::sink_parameter_spec(p, sinks)) {
      if (spec->init == SinkInit::Normal) value.normal_(0.0, small, generator);
      else value.zero_();
    } else if (ends_with(name, ".bias")) {
      value.zero_();
    } else if (ends_with(name, "attention.dense.weight") || ends_with(name, "dense_4h_to_h.weight")) {
      value.normal_(0.0, wang, generator);
    } else {
      value.normal_(0.0, small, generator);
    }
    p.copy_(value);
  }
}

}  // namespace sinklm
