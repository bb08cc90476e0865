#include "cli/commands.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "cli/forward_pass.h"
#include "core/args.h"
#include "core/error.h"
#include "model/checkpoint.h"
#include "model/model_summary.h"

namespace sinklm {
namespace {

const FlagSpec kSetFlag{"set", "KEY=VALUE", "override a config key (repeatable), e.g. model.sink.mode=token"};

}  // namespace

int run_init_command(const std::vector<std::string>& argv) {
  Args args("init", "--config FILE --out DIR [--set KEY=VALUE ...] [--dtype fp32|bf16|fp16] [--text FILE]",
            {{"config", "FILE", "model config (YAML), e.g. configs/tiny-sink.yaml"},
             {"out", "DIR", "checkpoint directory to write (replaced atomically if it exists)"},
             kSetFlag,
             {"dtype", "TYPE", "stored dtype of the weights (default fp32)"},
             {"text", "FILE", "also run a forward pass on this text before saving and check the reload"},
             {"ids", "\"ID ID ...\"", "as --text, with token ids"},
             {"max-tokens", "N", "tokens of --text to use (default 256)"}},
            argv);
  if (args.print_help_if_requested()) return 0;
  Config config = Config::load_file(args.require("config"));
  config.apply_overrides(args.get_all("set"));
  ModelConfig model_config = ModelConfig::from(config);
  GPTNeoXForCausalLM model(model_config);
  const std::string out = args.require("out");
  const auto dtype = parse_dtype(args.get("dtype", "fp32"));
  save_checkpoint(out, config, model, dtype);
  std::cout << "initialised " << count_parameters(model_config).total << " parameters ("
            << sink_mode_name(model_config.sink_mode) << " sink) -> " << out << "\n";
  if (args.has("text") || args.has("ids")) {
    auto ids = input_ids(args, model_config, args.get_int("max-tokens", 256));
    model->to(dtype);  // compare against exactly what was stored
    model->to(torch::kFloat32);
    ForwardResult before = forward_on(model, ids);
    LoadedModel reloaded = load_checkpoint(out);
    ForwardResult after = forward_on(reloaded.model, ids);
    double max_diff = (before.logits - after.logits).abs().max().item<double>();
    std::cout << "forward on " << ids.size() << " tokens: mean NLL "
              << before.mean_nll << " nats (uniform would be " << std::log(double(model_config.vocab_size))
              << "); reload check: max |logit difference| = " << max_diff << "\n";
    if (max_diff != 0) fail(out, ": reloaded checkpoint gives different logits (max |diff| ", max_diff, ")");
  }
  return 0;
}

}  // namespace sinklm
