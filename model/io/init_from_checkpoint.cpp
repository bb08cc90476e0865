#include "model/io/init_from_checkpoint.h"

#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "model/io/checkpoint.h"

namespace fs = std::filesystem;

namespace sinklm {

namespace {

const char* const kEmbedIn = "gpt_neox.embed_in.weight";

// Every architecture key whose value differs, as "model.KEY: SOURCE there, TARGET here"; the vocabulary
// is checked apart (padding rows may differ).
std::vector<std::string> architecture_differences(const ModelConfig& source, const ModelConfig& target) {
  std::vector<std::string> out;
  auto compare = [&](const char* key, double a, double b) {
    if (a != b) out.push_back(str("model.", key, ": ", a, " there, ", b, " here"));
  };
  compare("hidden_size", source.hidden_size, target.hidden_size);
  compare("num_layers", source.num_layers, target.num_layers);
  compare("num_heads", source.num_heads, target.num_heads);
  compare("intermediate_size", source.intermediate_size, target.intermediate_size);
  compare("rotary_pct", source.rotary_pct, target.rotary_pct);
  compare("rotary_base", source.rotary_base, target.rotary_base);
  compare("layer_norm_eps", source.layer_norm_eps, target.layer_norm_eps);
  compare("parallel_residual", source.parallel_residual, target.parallel_residual);
  return out;
}

void check_compatible(const std::string& dir, const ModelConfig& source, const ModelConfig& target,
                      const Config& config, const std::string& key) {
  auto differences = architecture_differences(source, target);
  if (target.tokenizer_vocab_size > source.vocab_size)
    differences.push_back(str("model.tokenizer_vocab_size: ", target.tokenizer_vocab_size, " ids here, but only ",
                              source.vocab_size, " embedding rows there"));
  if (differences.empty()) return;
  std::string listed;
  for (const auto& d : differences) listed += "\n  " + d;
  fail(config.source(), ": ", key, " = ", dir, ": the checkpoint is another architecture (there = the checkpoint, "
       "here = this config):", listed, "\nset these model.* keys as the checkpoint has them");
}

// Whether the source learned sink token `i` of the target (same mode, same id).
bool source_has_sink_token(const ModelConfig& source, const ModelConfig& target, int64_t i) {
  return source.sink_mode == SinkMode::Token && i < source.sink_count &&
         source.sink_token_id(i) == target.sink_token_id(i);
}

}  // namespace

InitFromReport init_from_checkpoint(const std::string& dir, const Config& config, GPTNeoXForCausalLM& model,
                                    const std::string& key) {
  torch::NoGradGuard no_grad;
  if (!fs::is_directory(dir))
    fail(config.source(), ": ", key, " = ", dir, ": no such directory (a sinklm checkpoint or a Hugging Face "
         "GPT-NeoX directory)");
  const ModelConfig source = ModelConfig::from(load_checkpoint_config(dir));
  const ModelConfig& target = model->config();
  check_compatible(dir, source, target, config, key);
  GPTNeoXForCausalLM source_model(source, InitialWeights::Loaded);
  load_model_tensors(dir, source_model);

  InitFromReport report;
  auto params = model->named_parameters();
  auto source_params = source_model->named_parameters();
  for (const auto& item : source_params) {
    const std::string& name = item.key();
    const torch::Tensor& from = item.value();
    torch::Tensor* to = params.find(name);
    if (!to)
      fail(dir, ": tensor '", name, "' (a ", sink_mode_name(source.sink_mode), " model's) has no place in the ",
           sink_mode_name(target.sink_mode), " model of ", config.source(), "; ", key,
           " takes a vanilla checkpoint or one of the same sink mode, so nothing learned is dropped");
    if (from.sizes() == to->sizes()) {
      to->copy_(from);
      ++report.copied;
    } else {  // an embedding matrix of another padded vocabulary: [V, hidden] (the architecture check holds)
      SINKLM_ASSERT(from.dim() == 2 && from.size(1) == to->size(1), name, " ", from.sizes(), " vs ", to->sizes());
      const int64_t rows = std::min(from.size(0), to->size(0));
      to->narrow(0, 0, rows).copy_(from.narrow(0, 0, rows));
      report.resized.push_back(name);
    }
  }
  for (const auto& item : params)
    if (!source_params.find(item.key())) report.fresh.push_back(item.key());

  if (target.eos_token_id < 0 || target.eos_token_id >= target.tokenizer_vocab_size)
    fail(config.source(), ": model.eos_token_id (", target.eos_token_id, ") is not an id of the tokenizer's ",
         target.tokenizer_vocab_size, "; ", key, " starts sink tokens from the end-of-text row");
  torch::Tensor& embed_in = *params.find(kEmbedIn);  // [V, hidden]
  for (int64_t i = 0; i < target.sink_count; ++i) {
    if (source_has_sink_token(source, target, i)) continue;
    embed_in[target.sink_token_id(i)].copy_(embed_in[target.eos_token_id]);
    report.sink_rows_from_eos.push_back(target.sink_token_id(i));
  }
  return report;
}

std::string describe(const InitFromReport& report) {
  std::ostringstream out;
  out << report.copied << " tensors copied";
  for (const auto& name : report.resized) out << ", " << name << " (overlapping rows)";
  if (!report.fresh.empty()) out << "; " << report.fresh.size() << " new to this sink mode, as initialised (" << report.fresh.front() << (report.fresh.size() > 1 ? ", ..." : "") << ")";
  for (int64_t id : report.sink_rows_from_eos) out << "; sink token " << id << " starts as the end-of-text row";
  return out.str();
}

}  // namespace sinklm
