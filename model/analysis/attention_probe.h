// Where a GPT-NeoX model's attention goes: each layer's attention probabilities, from a back-end
// (model/attention/attention_backend.h) that runs the model's own forward and also computes the reference softmax of
// model/attention/attention.h on the same q, k (the sink column of softmax1 / logit models dropped, so a row sums to
// 1 minus the mass the sink absorbed), each layer's value norms (how much a key adds when attended: a sink
// that does nothing has a small one) and each layer's output gate where the mode has one.
#pragma once
#include <torch/types.h>

#include <vector>

#include "model/gpt_neox.h"

namespace sinklm {

struct AttentionRecord {
  std::vector<torch::Tensor> probabilities;  // per layer [H, T, T] float32 (query rows, key columns; zero above
                                             // the diagonal), on the CPU
  std::vector<torch::Tensor> gates;          // per layer [T, width] float32 after the sigmoid (mode gated), else empty
  std::vector<torch::Tensor> value_norms;    // per layer [H, T] float32: each key's value vector's L2 norm
  std::vector<torch::Tensor> column_value_norms;  // per layer [H] float32: the sink column's value norm (0: a
                                                  // column without a value), undefined without a column
};

// ids: [1, T] int64 on the model's device, positions 0..T-1: one forward, recorded.
AttentionRecord record_attention(GPTNeoXForCausalLM& model, const torch::Tensor& ids);

}  // namespace sinklm
