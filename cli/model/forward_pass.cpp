#include "cli/model/forward_pass.h"

#include <torch/torch.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "model/sink.h"

namespace sinklm {

torch::ScalarType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "float32") return torch::kFloat32;
  if (name == "bf16" || name == "bfloat16") return torch::kBFloat16;
  if (name == "fp16" || name == "float16") return torch::kFloat16;
  fail("--dtype ", name, ": expected fp32, bf16 or fp16");
}

std::vector<int64_t> input_ids(const Args& args, const ModelConfig& model, int64_t max_tokens) {
  std::vector<int64_t> ids;
  if (args.has("ids")) {
    std::istringstream in(args.get("ids"));
    std::string word;
    while (in >> word) {
      try {
        ids.push_back(std::stoll(word));
      } catch (...) {
        fail("--ids: '", word, "' is not an integer token id");
      }
    }
  } else if (args.has("text")) {
    std::ifstream in(args.get("text"), std::ios::binary);
    if (!in) fail("--text ", args.get("text"), ": cannot open");
    for (char ch; ids.size() < static_cast<size_t>(max_tokens) && in.get(ch);)
      ids.push_back(static_cast<unsigned char>(ch));
  } else {
    fail("give the input as --ids \"1 2 3\" or --text FILE");
  }
  if (ids.size() > static_cast<size_t>(max_tokens)) ids.resize(max_tokens);
  for (int64_t id : ids)
    if (id < 0 || id >= model.tokenizer_vocab_size)
      fail("token id ", id, " is outside the tokenizer vocabulary [0, ", model.tokenizer_vocab_size, ")");
  if (ids.empty()) fail("the input is empty");
  // A token-sink model always sees its sink token(s) first, as in training.
  return with_sink_prefix(model, ids);
}

ForwardResult forward_on(GPTNeoXForCausalLM& model, const std::vector<int64_t>& ids) {
  c10::InferenceMode inference;
  auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0);
  ForwardResult r;
  r.logits = model->forward(input)[0].to(torch::kFloat32);  // [T, V]
  const int64_t first = sink_prefix_length(model->config()), T = input.size(1);
  r.predicted = T - 1 - first;
  if (r.predicted > 0) {
    auto logits = r.logits.narrow(0, first, r.predicted);
    auto targets = input[0].narrow(0, first + 1, r.predicted);
    r.mean_nll = torch::nn::functional::cross_entropy(logits, targets).item<double>();
  }
  return r;
}

}  // namespace sinklm
