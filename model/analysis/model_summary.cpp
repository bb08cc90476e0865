#include "model/analysis/model_summary.h"

#include <cstdio>
#include <sstream>

namespace sinklm {
namespace {

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string mebibytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

nlohmann::json model_summary_json(const ModelConfig& c) {
  ParameterCount params = count_parameters(c);
  const int64_t kv_values_per_token = 2 * c.num_layers * c.hidden_size;  // K and V, every layer
  return {
      {"architecture", "gpt_neox"},
      {"num_layers", c.num_layers},
      {"hidden_size", c.hidden_size},
      {"num_heads", c.num_heads},
      {"head_dim", c.head_dim()},
      {"intermediate_size", c.intermediate_size},
      {"rotary_dims", c.rotary_dims()},
      {"rotary_base", c.rotary_base},
      {"max_position_embeddings", c.max_position_embeddings},
      {"parallel_residual", c.parallel_residual},
      {"vocab_size", c.vocab_size},
      {"tokenizer_vocab_size", c.tokenizer_vocab_size},
      {"sink_mode", sink_mode_name(c.sink_mode)},
      {"sink_token_count", c.sink_count},
      {"sink_parameters_per_layer", sink_parameter_count(c)},
      {"default_cache_sinks", default_cache_sinks(c)},
      {"loads_in_transformers", loads_in_transformers(c.sink_mode)},
      {"parameters", params.total},
      {"non_embedding_parameters", params.non_embedding()},
      {"weight_bytes_fp32", params.total * 4},
      {"weight_bytes_bf16", params.total * 2},
      {"kv_bytes_per_token_fp32", kv_values_per_token * 4},
      {"kv_bytes_per_token_bf16", kv_values_per_token * 2},
  };
}

std::string model_summary_text(const ModelConfig& c) {
  nlohmann::json j = model_summary_json(c);
  std::ostringstream out;
  auto line = [&](const char* label, const std::string& value) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%-14s", label);
    out << "  " << buf << value << "\n";
  };
  line("architecture", "GPT-NeoX decoder: " + std::to_string(c.num_layers) + " layers, hidden " +
                           std::to_string(c.hidden_size) + ", " + std::to_string(c.num_heads) + " heads (head dim " +
                           std::to_string(c.head_dim()) + "), MLP " + std::to_string(c.intermediate_size) + " GELU");
  std::ostringstream rotary;
  rotary << "rotary on " << c.rotary_dims() << " of " << c.head_dim() << " dims per head (base " << c.rotary_base
         << "), trained length " << c.max_position_embeddings;
  line("positions", rotary.str());
  line("residual", c.parallel_residual ? "parallel: x + attn(ln1(x)) + mlp(ln2(x))" : "sequential");
  line("vocabulary", with_commas(c.vocab_size) + " rows (tokenizer " + with_commas(c.tokenizer_vocab_size) + ", sink " +
                         std::to_string(c.sink_count) + ", padding " +
                         with_commas(c.vocab_size - c.tokenizer_vocab_size - c.sink_count) + "), untied in/out");
  line("sink", sink_mode_description(c));
  line("transformers", loads_in_transformers(c.sink_mode)
                           ? "loads as GPTNeoXForCausalLM (config.json + model.safetensors)"
                           : std::string("not loadable: its GPT-NeoX has no ") + sink_mode_name(c.sink_mode) +
                                 " attention; run it with sinklm");
  line("parameters", with_commas(j["parameters"]) + " total, " + with_commas(j["non_embedding_parameters"]) +
                         " non-embedding");
  line("weights", mebibytes(j["weight_bytes_fp32"]) + " fp32, " + mebibytes(j["weight_bytes_bf16"]) + " bf16");
  const int64_t kv32 = j["kv_bytes_per_token_fp32"], kv16 = j["kv_bytes_per_token_bf16"];
  line("KV cache", with_commas(kv32) + " bytes/token fp32, " + with_commas(kv16) + " bf16; a 1024-entry cache: " +
                       mebibytes(1024.0 * kv32) + " fp32, " + mebibytes(1024.0 * kv16) + " bf16");
  return out.str();
}

}  // namespace sinklm
