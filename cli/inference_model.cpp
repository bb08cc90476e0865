#include "cli/inference_model.h"

#include <torch/cuda.h>
#include <torch/utils.h>

#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "data/tokenizers/tokenizer_files.h"
#include "model/analysis/roofline.h"
#include "model/projection.h"

namespace fs = std::filesystem;

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

void say_device(const std::string& asked, const torch::Device& chosen) {
  std::cerr << "sinklm: device " << (chosen.is_cuda() ? "cuda" : "cpu");
  if (asked == "auto") std::cerr << (chosen.is_cuda() ? " (--device auto: CUDA is visible)" : " (--device auto: no CUDA device is visible)");
  std::cerr << "\n";
}

// Steps 2-4 of the order in the header after an explicit --tokenizer (step 1).
std::string tokenizer_path(const ModelFlags& flags, const std::string& checkpoint, const LoadedModel& loaded) {
  if (!flags.tokenizer.empty()) return flags.tokenizer;
  if (!find_tokenizer_file(checkpoint).empty()) return "";  // load_text_codec finds it in the directory
  const std::string trained_with = loaded.config.get_string("data.tokenizer");
  return !trained_with.empty() && fs::exists(trained_with) ? trained_with : "";
}

// The note for a format this CPU has no few-row kernel for: what runs instead.
void say_fallback(WeightFormat format) {
  if (format == WeightFormat::Fp32 || few_row_kernel_available(format)) return;
  std::cerr << "sinklm: note: no " << weight_format_name(format) << " decode kernel here (it needs AVX2 with FMA, or AVX-512 with "
            << (format == WeightFormat::Bf16 ? "AVX512-BF16): LibTorch's bf16 linear runs instead"
                                             : "AVX512-VNNI): LibTorch's float32 linear runs on the dequantized int8 weights")
            << "\n";
}

// --weights: every projection in the flag's format, or (auto) in the one it is stored in. Returns the format
// that holds the most weights.
WeightFormat hold_weights(GPTNeoXForCausalLM& model, const StoredFormats& stored, const std::string& flag, const torch::Device& device) {
  const bool as_stored = flag == "auto";
  const WeightFormat asked = as_stored ? WeightFormat::Fp32 : parse_weight_format(flag, "--weights");
  for (const auto& item : model->named_modules()) {
    auto* projection = item.value()->as<ProjectionImpl>();
    if (!projection) continue;
    const WeightFormat format = as_stored ? stored.at(item.key() + ".weight") : asked;
    if (format != WeightFormat::Fp32) projection->set_weight_format(format);
  }
  const auto held = weights_per_format(model);
  const WeightFormat most = main_format(held);
  if (held.size() == 1 && most == WeightFormat::Fp32) return most;
  for (const auto& [format, count] : held)
    if (device.is_cpu()) say_fallback(format);
  std::cerr << "sinklm: weights " << format_names(held) << (as_stored ? " (--weights auto: as stored)" : "") << "\n";
  return most;
}

}  // namespace

std::vector<FlagSpec> model_flags(ModelFlags& o) {
  return {flag(&o.checkpoint, "checkpoint", "DIR", "checkpoint directory (sinklm or Hugging Face GPT-NeoX)"),
          flag(&o.tokenizer, "tokenizer", "PATH", "tokenizer file, or bytes (default: the one in the checkpoint, else data.tokenizer, else bytes for a 256-id model)"),
          flag(&o.device, "device", "DEV", "cpu | cuda | auto (CUDA when one is visible)"),
          flag(&o.weights, "weights", "T", "the projections' weights: fp32 | bf16 | int8 (blocks of 32, as q8_0) | auto (as stored)"),
          flag(&o.threads, "threads", "N", "intra-op CPU threads for the model (0: LibTorch's choice)", Range{0, 4096}),
          flag(&o.set, "set", "KEY=VALUE", "override a run-time config key, e.g. model.attention=reference")};
}

std::vector<FlagSpec> cache_flags(CacheFlags& o, CacheFlagSet set) {
  constexpr Range kSize{-1, 1 << 24};
  std::vector<FlagSpec> sizes = {
      flag(&o.window, "window", "W", "cache budget in entries, sinks included (full: its limit; -1: the model's trained length)", kSize),
      flag(&o.sinks, "sinks", "S", "sink entries (-1: the model's sink tokens for token models, else 4; 0 for window; recompute: the model's sink tokens, 0 for others)", kSize),
      flag(&o.positions, "positions", "RULE", "cache (positions inside the cache) | stream"),
      flag(&o.retrieval_window, "retrieval-window", "R", "heads: a retrieval head's budget, sinks included (-1: 4 W)", kSize)};
  if (set == CacheFlagSet::Sizes) return sizes;
  return with_flags({flag(&o.cache, "cache", "POLICY", "full | window | sink_window | recompute | heads (per head, --head-policy)"),
                     flag(&o.kv_dtype, "kv-dtype", "T", "how K/V entries are stored: auto (bf16 for bf16 weights, else fp32) | fp32 | bf16 (half the bytes) | int8 (a scale per entry and head, sink slots exact in float32: 0.52x bf16 at D = 64) | int8-all (the sinks quantised too: an ablation)"),
                     flag(&o.head_policy, "head-policy", "FILE", "heads: which heads keep --retrieval-window entries (sinklm analyze --classify-heads)")},
                    {sizes});
}

int64_t trained_positions(const Config& config, const std::string& checkpoint_or_config) {
  const fs::path path(checkpoint_or_config);
  const bool hugging_face = fs::is_directory(path) && !fs::exists(path / "sinklm.yaml");
  return config.get_int(hugging_face ? "model.max_position_embeddings" : "train.seq_len");
}

CacheOptions cache_options(const CacheFlags& f, const ModelConfig& model, int64_t trained, WeightFormat weights) {
  CacheOptions o;
  o.policy = f.cache;
  o.window = f.window;
  o.sinks = f.sinks;
  o.positions = parse_position_rule(f.positions, "--positions");
  // auto: the weights' dtype; recompute keeps no K/V, so only fp32 applies to it
  const bool bf16 = weights == WeightFormat::Bf16 && f.cache != "recompute";
  if (f.kv_dtype == "auto") o.kv_format = bf16 ? KvFormat::Bf16 : KvFormat::Fp32;
  else o.kv_format = parse_kv_format(f.kv_dtype, "--kv-dtype");
  o.retrieval_window = f.retrieval_window;
  if (!f.head_policy.empty()) o.head_roles = std::make_shared<HeadRoles>(read_head_roles(f.head_policy));
  std::vector<std::string> warnings;
  o = resolve_cache_options(o, model, trained, "--cache/--window/--sinks/--retrieval-window", &warnings);
  for (const auto& line : warnings) std::cerr << "sinklm: warning: " << line << "\n";
  return o;
}

CacheOptions cache_options(const CacheFlags& f, const InferenceModel& m) {
  return cache_options(f, m.loaded.model->config(), m.trained_positions, m.weights);
}

FlagSpec set_flag(std::vector<std::string>* overrides) {
  return flag(overrides, "set", "KEY=VALUE", "override a config key (repeatable), e.g. model.sink.mode=token");
}

std::vector<FlagSpec> with_flags(std::vector<FlagSpec> own, std::initializer_list<std::vector<FlagSpec>> shared) {
  for (const auto& extra : shared) own.insert(own.end(), extra.begin(), extra.end());
  return own;
}

std::string tokenizer_source(const ModelFlags& flags, const LoadedModel& loaded) {
  if (flags.tokenizer == "bytes") return "";
  const std::string path = tokenizer_path(flags, flags.checkpoint, loaded);
  return path.empty() ? find_tokenizer_file(flags.checkpoint) : path;
}

InferenceModel open_inference_model(const ModelFlags& flags, NeedsText needs_text) {
  if (flags.threads > 0) torch::set_num_threads(static_cast<int>(flags.threads));
  if (flags.checkpoint.empty()) fail("missing required option --checkpoint DIR");
  InferenceModel m;
  m.checkpoint = flags.checkpoint;
  m.device = parse_device(flags.device);
  say_device(flags.device, m.device);
  m.loaded = load_checkpoint(m.checkpoint, m.device, flags.set);
  m.trained_positions = trained_positions(m.loaded.config, m.checkpoint);
  m.loaded.model->eval();
  m.weights = hold_weights(m.loaded.model, m.loaded.stored, flags.weights, m.device);
  if (needs_text == NeedsText::No) return m;
  m.codec = load_text_codec(tokenizer_path(flags, m.checkpoint, m.loaded), m.checkpoint,
                            m.loaded.model->config().tokenizer_vocab_size);
  return m;
}

}  // namespace sinklm
