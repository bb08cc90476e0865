#include "cli/commands.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "cli/model/forward_pass.h"
#include "cli/inference_model.h"
#include "core/config/args.h"
#include "model/io/checkpoint.h"
#include "model/io/safetensors.h"

namespace sinklm {

int run_forward_command(const std::vector<std::string>& argv) {
  std::string checkpoint, ids_text, text, out;
  int64_t max_tokens = 2048;
  std::vector<std::string> overrides;
  Args args("forward", "--checkpoint DIR (--ids \"1 2 3\" | --text FILE) [--out logits.safetensors]",
            {flag(&checkpoint, "checkpoint", "DIR", "checkpoint directory (sinklm or Hugging Face GPT-NeoX)"),
             flag(&ids_text, "ids", "\"ID ID ...\"", "token ids (whitespace separated)"),
             flag(&text, "text", "FILE", "text file, fed as UTF-8 bytes (id = byte value)"),
             flag(&max_tokens, "max-tokens", "N", "truncate the input to N tokens", Range{1, 1e12}),
             flag(&out, "out", "FILE", "write the logits [T, V] (float32) as safetensors tensor 'logits'"),
             set_flag(&overrides)},
            argv);
  if (args.print_help_if_requested()) return 0;
  LoadedModel loaded = load_checkpoint(args.require("checkpoint"), torch::kCPU, overrides);
  auto ids = input_ids(args, loaded.model->config(), max_tokens);
  ForwardResult result = forward_on(loaded.model, ids);
  nlohmann::json report = {{"tokens", ids.size()}, {"predicted_tokens", result.predicted}};
  if (result.predicted > 0) {
    report["mean_nll"] = result.mean_nll;
    report["perplexity"] = std::exp(result.mean_nll);
  }
  if (!out.empty()) {
    write_safetensors(out, {{"logits", result.logits}, {"input_ids", torch::tensor(ids, torch::kInt64)}});
    report["logits_file"] = out;
  }
  std::cout << report.dump() << "\n";
  return 0;
}

}  // namespace sinklm
