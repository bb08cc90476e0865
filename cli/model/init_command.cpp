#include "cli/commands.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "cli/model/forward_pass.h"
#include "cli/inference_model.h"
#include "core/config/args.h"
#include "core/error.h"
#include "model/io/checkpoint.h"
#include "model/analysis/model_summary.h"

namespace sinklm {

int run_init_command(const std::vector<std::string>& argv) {
  std::string config_file, out, dtype_name = "fp32", text, ids_text;
  std::vector<std::string> overrides;
  int64_t max_tokens = 256;
  Args args("init", "--config FILE --out DIR [--set KEY=VALUE ...] [--dtype fp32|bf16|fp16] [--text FILE]",
            {flag(&config_file, "config", "FILE", "model config (YAML), e.g. configs/tiny-sink.yaml"),
             flag(&out, "out", "DIR", "checkpoint directory to write (replaced atomically if it exists)"),
             set_flag(&overrides),
             flag(&dtype_name, "dtype", "TYPE", "stored dtype of the weights: fp32 | bf16 | fp16"),
             flag(&text, "text", "FILE", "also run a forward pass on this text before saving and check the reload"),
             flag(&ids_text, "ids", "\"ID ID ...\"", "as --text, with token ids"),
             flag(&max_tokens, "max-tokens", "N", "tokens of --text to use", Range{1, 1e12})},
            argv);
  if (args.print_help_if_requested()) return 0;
  Config config = Config::load_file(args.require("config"));
  config.apply_overrides(overrides);
  ModelConfig model_config = ModelConfig::from(config);
  GPTNeoXForCausalLM model(model_config);
  args.require("out");
  const auto dtype = parse_dtype(dtype_name);
  save_checkpoint(out, config, model, dtype);
  std::cout << "initialised " << count_parameters(model_config).total << " parameters ("
            << sink_mode_name(model_config.sink_mode) << " sink) -> " << out << "\n";
  if (args.has("text") || args.has("ids")) {
    auto ids = input_ids(args, model_config, max_tokens);
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
