// GPT-NeoX decoder (the Pythia architecture) with the sink variants of `model.sink.mode` (model/sink.h).
// Module and parameter names follow Hugging Face's GPTNeoXForCausalLM exactly, so named_parameters()
// are the checkpoint's tensor names (gpt_neox.layers.N.attention.query_key_value.weight, ...).
//
// The decoder layer is written once, here. Where its attention is computed (whole sequence, a probe that
// records probabilities, many streams against their KV caches) is an AttentionBackend
// (model/attention/attention_backend.h); nothing outside model/ reaches into a layer's submodules.
#pragma once
#include <functional>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>

#include "model/attention/attention_backend.h"
#include "model/model_config.h"
#include "model/projection.h"
#include "model/attention/rotary.h"

namespace sinklm {

class GPTNeoXAttentionImpl : public torch::nn::Module {
 public:
  explicit GPTNeoXAttentionImpl(const ModelConfig& config);
  // x: [B, T, C] -> [B, T, C]; q, k, v go to `backend` as layer `layer`.
  torch::Tensor forward(const torch::Tensor& x, AttentionBackend& backend, int64_t layer);
  // The extra softmax column of this layer's heads (model/sink.h), absent for modes without one.
  SinkColumn sink_column() const;

  Projection query_key_value{nullptr};  // [3C, C], rows grouped per head as [q, k, v]
  Projection dense{nullptr};            // [C, C]
  Projection gate{nullptr};             // [width, C] + bias (mode gated, model/sink.h: output_gate_width), else null
  std::vector<torch::Tensor> sink_parameters;  // the mode's, in sink_parameters(config) order (model/sink.h)

 private:
  ModelConfig config_;
};
TORCH_MODULE(GPTNeoXAttention);

class GPTNeoXMLPImpl : public torch::nn::Module {
 public:
  explicit GPTNeoXMLPImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // [B, T, C] -> [B, T, C], exact (erf) GELU
  Projection dense_h_to_4h{nullptr}, dense_4h_to_h{nullptr};
};
TORCH_MODULE(GPTNeoXMLP);

class GPTNeoXLayerImpl : public torch::nn::Module {
 public:
  explicit GPTNeoXLayerImpl(const ModelConfig& config);
  // x: [B, T, C] -> [B, T, C]. Parallel residual x + attn(ln1(x)) + mlp(ln2(x)), else sequential.
  torch::Tensor forward(const torch::Tensor& x, AttentionBackend& backend, int64_t layer);
  torch::nn::LayerNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  GPTNeoXAttention attention{nullptr};
  GPTNeoXMLP mlp{nullptr};

 private:
  bool parallel_residual_;
};
TORCH_MODULE(GPTNeoXLayer);

class GPTNeoXModelImpl : public torch::nn::Module {
 public:
  explicit GPTNeoXModelImpl(const ModelConfig& config);
  torch::nn::Embedding embed_in{nullptr};  // [V, C]
  torch::nn::ModuleList layers{nullptr};
  torch::nn::LayerNorm final_layer_norm{nullptr};
};
TORCH_MODULE(GPTNeoXModel);

// Drawn: the model's own initialisation (init_seed). Loaded: left as the modules' constructors made them,
// because a checkpoint overwrites every parameter next (drawing 160M normals took a second per command).
enum class InitialWeights { Drawn, Loaded };

// A sink parameter of one layer and its spec (owned by the model).
struct SinkParameter {
  torch::Tensor tensor;
  const SinkParameterSpec* spec;
};
// The spec of `parameter` when it is one of `sink_parameters` (by the tensor, not its name), else null.
const SinkParameterSpec* sink_parameter_spec(const torch::Tensor& parameter, const std::vector<SinkParameter>& sink_parameters);

class GPTNeoXForCausalLMImpl : public torch::nn::Module {
 public:
  explicit GPTNeoXForCausalLMImpl(const ModelConfig& config, InitialWeights weights = InitialWeights::Drawn);

  // input_ids: [B, T] int64; positions: [T] or [B, T] int64 (undefined = 0..T-1). Returns logits [B, T, V].
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& positions = {});
  // Final hidden states [B, T, C] (after the final LayerNorm, before embed_out), for callers that project
  // only some positions. The first form is causal attention at `positions` (the model's attention impl).
  torch::Tensor hidden_states(const torch::Tensor& input_ids, const torch::Tensor& positions = {});
  torch::Tensor hidden_states(const torch::Tensor& input_ids, AttentionBackend& backend);

  // GPT-NeoX initialisation: N(0, sqrt(2 / 5C)) ("small init") everywhere, N(0, 2 / (L sqrt C)) ("wang init")
  // for the two output projections of each layer, zero biases, unit LayerNorms, sink parameters as their
  // spec says (model/sink.h: zero, or small init).
  // Deterministic from config.init_seed, independent of the device.
  void initialize();

  const ModelConfig& config() const { return config_; }
  const RotaryEmbedding& rotary() const { return rotary_; }
  // train.activation_checkpointing: the causal forward keeps only each layer's input for backward and
  // recomputes the layer there (model/activation_checkpoint.h). Off outside grad mode anyway.
  void set_activation_checkpointing(bool on) { activation_checkpointing_ = on; }
  // Every layer's sink parameters (model/sink.h: sink_parameters), each with its spec: the optimiser's
  // treatment of them (weight decay, learning rate) follows the spec, never a parameter name.
  std::vector<SinkParameter> sink_parameters() const;
  // The spec of a parameter the sink mode added (by the tensor, not its name), null for other parameters.
  const SinkParameterSpec* sink_parameter_spec(const torch::Tensor& parameter) const;
  GPTNeoXModel gpt_neox{nullptr};
  Projection embed_out{nullptr};  // [V, C], untied from embed_in

 private:
  // Embedding, then layer_step(index, x) for each layer in order, then the final LayerNorm.
  using LayerStep = std::function<torch::Tensor(int64_t index, const torch::Tensor& x)>;
  torch::Tensor run_layers(const torch::Tensor& input_ids, const LayerStep& layer_step);

  ModelConfig config_;
  RotaryEmbedding rotary_;
  std::vector<SinkParameterSpec> sink_parameter_specs_;
  bool activation_checkpointing_ = false;
};
TORCH_MODULE(GPTNeoXForCausalLM);

}  // namespace sinklm
