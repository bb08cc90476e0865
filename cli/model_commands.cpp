#include "cli/commands.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/args.h"
#include "core/error.h"
#include "model/checkpoint.h"
#include "model/model_summary.h"
#include "model/safetensors.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

const FlagSpec kSetFlag{"set", "KEY=VALUE", "override a config key (repeatable), e.g. model.sink.mode=token"};

torch::ScalarType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "float32") return torch::kFloat32;
  if (name == "bf16" || name == "bfloat16") return torch::kBFloat16;
  if (name == "fp16" || name == "float16") return torch::kFloat16;
  fail("--dtype ", name, ": expected fp32, bf16 or fp16");
}

// Token ids for a forward pass: --ids "1 2 3", or --text FILE read as UTF-8 bytes (id = byte value), the
// tokenizer-free encoding every vocabulary of at least 256 rows accepts.
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

struct ForwardResult {
  torch::Tensor logits;  // [T, V]
  double mean_nll = 0;   // over next-token predictions of text tokens (never predicting a sink)
  int64_t predicted = 0;
};

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

Config config_from_path(const std::string& path, const std::vector<std::string>& overrides) {
  Config config = fs::is_directory(path) ? load_checkpoint_config(path) : Config::load_file(path);
  config.apply_overrides(overrides);
  return config;
}

}  // namespace

int run_info_command(const std::vector<std::string>& argv) {
  Args args("info", "<config.yaml | checkpoint-dir> [--set KEY=VALUE ...] [--json]",
            {kSetFlag, {"json", "", "print one JSON object instead of text"}}, argv);
  if (args.help_requested() || args.positionals().size() != 1) {
    std::cout << args.usage();
    return args.help_requested() ? 0 : 2;
  }
  const std::string path = args.positionals()[0];
  Config config = config_from_path(path, args.get_all("set"));
  ModelConfig model = ModelConfig::from(config);
  nlohmann::json summary = model_summary_json(model);
  summary["source"] = path;
  if (fs::is_directory(path)) {
    int64_t stored = 0;
    std::set<std::string> dtypes;
    SafetensorsFile weights(path + "/model.safetensors");
    for (const auto& [name, entry] : weights.entries()) {
      int64_t n = 1;
      for (int64_t d : entry.shape) n *= d;
      stored += n;
      dtypes.insert(entry.dtype);
    }
    summary["checkpoint"] = {{"tensors", weights.entries().size()},
                             {"stored_parameters", stored},
                             {"dtypes", dtypes},
                             {"verified", fs::exists(path + "/manifest.json")}};
  }
  if (args.has("json")) {
    std::cout << summary.dump(2) << "\n";
    return 0;
  }
  std::cout << "sinklm info " << path << "\n" << model_summary_text(model);
  if (summary.contains("checkpoint")) {
    const auto& ck = summary["checkpoint"];
    std::cout << "  checkpoint    " << ck["tensors"] << " tensors, " << ck["stored_parameters"] << " values stored as "
              << ck["dtypes"].dump() << "; "
              << (ck["verified"] ? "manifest verified (size + sha256 of every file)" : "no manifest (Hugging Face export)")
              << "\n";
  }
  return 0;
}

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
