#include "cli/inference_model.h"

#include <torch/cuda.h>
#include <torch/utils.h>

#include <filesystem>

#include "core/error.h"

namespace sinklm {
namespace {

torch::Device parse_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda" || name == "auto") {
    if (torch::cuda::is_available()) return torch::kCUDA;
    if (name == "cuda") fail("--device cuda: no CUDA device is visible");
    return torch::kCPU;
  }
  fail("--device ", name, ": expected cpu, cuda or auto");
}

void apply_threads(const Args& args) {
  if (!args.has("threads")) return;
  const int64_t threads = args.get_int("threads", 1);
  if (threads < 1) fail("--threads must be at least 1, got ", threads);
  torch::set_num_threads(static_cast<int>(threads));
}

// Steps 2-4 of the order in the header after an explicit --tokenizer (step 1).
std::string tokenizer_path(const Args& args, const std::string& checkpoint, const LoadedModel& loaded) {
  if (args.has("tokenizer")) return args.get("tokenizer");
  if (!find_tokenizer_file(checkpoint).empty()) return "";  // load_text_codec finds it in the directory
  const std::string trained_with = loaded.config.get_string("data.tokenizer");
  return !trained_with.empty() && std::filesystem::exists(trained_with) ? trained_with : "";
}

}  // namespace

std::vector<FlagSpec> model_flags() {
  return {{"checkpoint", "DIR", "checkpoint directory (sinklm or Hugging Face GPT-NeoX)"},
          {"tokenizer", "PATH", "tokenizer file (default: the one in the checkpoint, else data.tokenizer, else bytes)"},
          {"device", "DEV", "cpu (default) | cuda | auto"},
          {"threads", "N", "intra-op CPU threads for the model (default: LibTorch's choice)"},
          {"set", "KEY=VALUE", "override a run-time config key, e.g. model.attention=reference"}};
}

std::vector<FlagSpec> cache_flags() {
  return {{"cache", "POLICY", "full | window | sink_window (default) | recompute | heads (per head, --head-policy)"},
          {"window", "W", "cache budget in entries, sinks included (default 1024; full: its limit)"},
          {"sinks", "S", "sink entries (default: the model's sink tokens for token models, else 4)"},
          {"positions", "RULE", "cache (positions inside the cache, default) | stream"},
          {"kv-dtype", "T", "how K/V entries are stored: fp32 (default) | bf16 (half the bytes per decode step)"},
          {"head-policy", "FILE", "heads: which heads keep --retrieval-window entries (sinklm analyze --classify-heads)"},
          {"retrieval-window", "R", "heads: a retrieval head's budget, sinks included (default 4 W)"}};
}

CacheOptions cache_options(const Args& args) {
  CacheOptions o;
  o.policy = args.get("cache", "sink_window");
  o.window = args.get_int("window", 1024);
  o.sinks = args.get_int("sinks", -1);
  o.positions = parse_position_rule(args.get("positions", "cache"), "--positions");
  o.kv_dtype = parse_kv_dtype(args.get("kv-dtype", "fp32"), "--kv-dtype");
  o.retrieval_window = args.get_int("retrieval-window", -1);
  if (args.has("head-policy")) o.head_roles = std::make_shared<HeadRoles>(read_head_roles(args.get("head-policy")));
  return o;
}

std::vector<FlagSpec> with_flags(std::vector<FlagSpec> own, std::initializer_list<std::vector<FlagSpec>> shared) {
  for (const auto& extra : shared) own.insert(own.end(), extra.begin(), extra.end());
  return own;
}

InferenceModel open_inference_model(const Args& args, NeedsText needs_text) {
  apply_threads(args);
  InferenceModel m;
  m.checkpoint = args.require("checkpoint");
  m.device = parse_device(args.get("device", "cpu"));
  m.loaded = load_checkpoint(m.checkpoint, m.device, args.get_all("set"));
  m.loaded.model->eval();
  if (needs_text == NeedsText::No) return m;
  m.codec = load_text_codec(tokenizer_path(args, m.checkpoint, m.loaded), m.checkpoint,
                            m.loaded.model->config().tokenizer_vocab_size);
  return m;
}

}  // namespace sinklm
