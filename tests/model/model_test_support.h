// Small helpers shared by the model tests.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <string>

#include "core/config/config.h"
#include "core/error.h"
#include "model/gpt_neox.h"
#include "../support/user_error_of.h"

namespace sinklm::testing_support {

// A tiny GPT-NeoX config (2 layers, width 32) with the given sink mode and overrides.
inline Config tiny_config(const std::string& sink_mode, std::vector<std::string> overrides = {}) {
  Config c;
  c.apply_overrides({"model.vocab_size=64", "model.tokenizer_vocab_size=60", "model.hidden_size=32",
                     "model.num_layers=2", "model.num_heads=4", "model.intermediate_size=64",
                     "model.rotary_pct=0.5", "model.max_position_embeddings=64", "model.sink.mode=" + sink_mode});
  c.apply_overrides(overrides);
  return c;
}

// Every model.sink.mode name (model/sink.h: all_sink_modes), the one list test loops run over.
inline std::vector<std::string> sink_mode_names() {
  std::vector<std::string> names;
  for (SinkMode mode : all_sink_modes()) names.push_back(sink_mode_name(mode));
  return names;
}

// Whether `p` is a weight or bias of some layer's output gate (mode gated), by the tensor.
inline bool is_output_gate_parameter(GPTNeoXForCausalLM& model, const torch::Tensor& p) {
  for (size_t l = 0; l < model->gpt_neox->layers->size(); ++l) {
    const auto& gate = model->gpt_neox->layers->ptr<GPTNeoXLayerImpl>(l)->attention->gate;
    if (gate && (gate->weight.is_same(p) || (gate->bias.defined() && gate->bias.is_same(p)))) return true;
  }
  return false;
}

// Sink parameters (e.g. the learned logit) and output gates drawn far from their init, so a test of a
// learned column does not pass because the column happens to equal another mode's constant one (logit 0 is
// softmax1), nor a gated model because its gates all sit near sigmoid(0).
inline void randomize_sink_parameters(GPTNeoXForCausalLM& model, uint64_t seed = 17) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& item : model->named_parameters())
    if (model->sink_parameter_spec(item.value()) || is_output_gate_parameter(model, item.value()))
      item.value().copy_(torch::randn(item.value().sizes()) * 1.5);
}

inline torch::Tensor random_ids(int64_t batch, int64_t length, int64_t vocab, uint64_t seed = 5) {
  torch::manual_seed(seed);
  return torch::randint(0, vocab, {batch, length}, torch::kInt64);
}

// Largest |got - expected| relative to the largest |expected| (+1, so values near 0 compare absolutely);
// infinity when the shapes differ. For float32 kernels checked against LibTorch's ops: ~1e-6 from rounding.
inline double scaled_max_error(const torch::Tensor& got, const torch::Tensor& expected) {
  if (got.sizes() != expected.sizes()) return std::numeric_limits<double>::infinity();
  return (got - expected).abs().max().item<double>() / (expected.abs().max().item<double>() + 1);
}

}  // namespace sinklm::testing_support
