// A forward pass over given token ids, shared by `sinklm init --text` (the reload check) and `sinklm forward`.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/args.h"
#include "model/gpt_neox.h"

namespace sinklm {

// fp32 | bf16 | fp16 (and their long names); UserError naming --dtype otherwise.
torch::ScalarType parse_dtype(const std::string& name);

// Token ids for a forward pass: --ids "1 2 3", or --text FILE read as UTF-8 bytes (id = byte value), the
// tokenizer-free encoding every vocabulary of at least 256 rows accepts. At most max_tokens, the model's sink
// prefix in front.
std::vector<int64_t> input_ids(const Args& args, const ModelConfig& model, int64_t max_tokens);

struct ForwardResult {
  torch::Tensor logits;  // [T, V]
  double mean_nll = 0;   // over next-token predictions of text tokens (never predicting a sink)
  int64_t predicted = 0;
};

ForwardResult forward_on(GPTNeoXForCausalLM& model, const std::vector<int64_t>& ids);

}  // namespace sinklm
