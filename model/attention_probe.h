// Where a GPT-NeoX model's attention goes: each layer's attention probabilities, from a back-end
// (model/attention_backend.h) that runs the model's own forward and also computes the reference softmax of
// model/attention.h on the same q, k (the sink column of softmax1 / logit models dropped, so a row sums to
// 1 minus the mass the sink absorbed), and each layer's output gate where the mode has one.
#pragma once
#include <torch/types.h>

#include <vector>

#include "model/gpt_neox.h"

namespace sinklm {

struct AttentionRecord {
  std::vector<torch::Tensor> probabilities;  // per layer [H, T, T] float32 (query rows, key columns; zero above
                                             // the diagonal), on the CPU
  std::vector<torch::Tensor> gates;          // per layer [T, width] float32 after the sigmoid (mode gated), else empty
};

// ids: [1, T] int64 on the model's device, positions 0..T-1: one forward, recorded.
AttentionRecord record_attention(GPTNeoXForCausalLM& model, const torch::Tensor& ids);

}  // namespace sinklm
