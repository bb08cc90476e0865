// Where a GPT-NeoX model's attention goes: each layer's attention probabilities, from a back-end
// (model/attention_backend.h) that runs the model's own forward and also computes the reference softmax of
// model/attention.h on the same q, k (the sink column of softmax1 / logit models dropped, so a row sums to
// 1 minus the mass the sink absorbed).
#pragma once
#include <torch/types.h>

#include <vector>

#include "model/gpt_neox.h"

namespace sinklm {

// ids: [1, T] int64 on the model's device, positions 0..T-1. Returns one [H, T, T] float32 tensor per
// layer (query rows, key columns; zero above the diagonal), on the CPU.
std::vector<torch::Tensor> attention_probabilities(GPTNeoXForCausalLM& model, const torch::Tensor& ids);

}  // namespace sinklm
