// Where a GPT-NeoX model's attention goes: each layer's attention probabilities, recomputed from the
// layer's input with the reference softmax of model/attention.h (the same q, k as the forward pass; the
// sink column of softmax1 / logit models dropped, so a row sums to 1 minus the mass the sink absorbed).
#pragma once
#include <torch/types.h>

#include <vector>

#include "model/gpt_neox.h"

namespace sinklm {

// ids: [1, T] int64 on the model's device, positions 0..T-1. Returns one [H, T, T] float32 tensor per
// layer (query rows, key columns; zero above the diagonal), on the CPU.
std::vector<torch::Tensor> attention_probabilities(GPTNeoXForCausalLM& model, const torch::Tensor& ids);

}  // namespace sinklm
