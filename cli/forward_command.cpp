#include "cli/commands.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "cli/forward_pass.h"
#include "core/args.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"

namespace sinklm {
namespace {

const FlagSpec kSetFlag{"set", "KEY=VALUE", "override a config key (repeatable), e.g. model.sink.mode=token"};

}  // namespace

int run_forward_command(const std::vector<std::string>& argv) {
  Args args("forward", "--checkpoint DIR (--ids \"1 2 3\" | --text FILE) [--out logits.safetensors]",
            {{"checkpoint", "DIR", "checkpoint directory (sinklm or Hugging Face GPT-NeoX)"},
             {"ids", "\"ID ID ...\"", "token ids (whitespace separated)"},
             {"text", "FILE", "text file, fed as UTF-8 bytes (id = byte value)"},
             {"max-tokens", "N", "truncate the input to N tokens (default 2048)"},
             {"out", "FILE", "write the logits [T, V] (float32) as safetensors tensor 'logits'"},
             kSetFlag},
            argv);
  if (args.print_help_if_requested()) return 0;
  LoadedModel loaded = load_checkpoint(args.require("checkpoint"), torch::kCPU, args.get_all("set"));
  auto ids = input_ids(args, loaded.model->config(), args.get_int("max-tokens", 2048));
  ForwardResult result = forward_on(loaded.model, ids);
  nlohmann::json report = {{"tokens", ids.size()}, {"predicted_tokens", result.predicted}};
  if (result.predicted > 0) {
    report["mean_nll"] = result.mean_nll;
    report["perplexity"] = std::exp(result.mean_nll);
  }
  if (args.has("out")) {
    write_safetensors(args.get("out"), {{"logits", result.logits}, {"input_ids", torch::tensor(ids, torch::kInt64)}});
    report["logits_file"] = args.get("out");
  }
  std::cout << report.dump() << "\n";
  return 0;
}

}  // namespace sinklm
