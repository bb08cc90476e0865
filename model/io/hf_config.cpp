#include "model/io/hf_config.h"

#include "core/error.h"

namespace sinklm {

namespace {
nlohmann::json id_or_null(int64_t id) { return id >= 0 ? nlohmann::json(id) : nlohmann::json(); }
}  // namespace

nlohmann::json hf_config_json(const ModelConfig& c) {
  return {
      {"architectures", {"GPTNeoXForCausalLM"}},
      {"model_type", "gpt_neox"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"intermediate_size", c.intermediate_size},
      {"hidden_act", "gelu"},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rotary_base}, {"partial_rotary_factor", c.rotary_pct}}},
      {"rotary_pct", c.rotary_pct},
      {"rotary_emb_base", c.rotary_base},
      {"max_position_embeddings", c.max_position_embeddings},
      {"layer_norm_eps", c.layer_norm_eps},
      {"use_parallel_residual", c.parallel_residual},
      {"tie_word_embeddings", false},
      {"attention_bias", true},
      {"bos_token_id", id_or_null(c.bos_token_id)},
      {"eos_token_id", id_or_null(c.eos_token_id)},
      {"pad_token_id", id_or_null(c.pad_token_id)},
      {"initializer_range", 0.02},
      {"torch_dtype", "float32"},
      {"sink",
       {{"mode", sink_mode_name(c.sink_mode)},
        {"count", c.sink_count},
        {"tokenizer_vocab_size", c.tokenizer_vocab_size},
        {"token_ids", sink_prefix(c)},
        {"gate", c.sink_gate_elementwise ? "elementwise" : "headwise"},
        {"kv_init", c.sink_kv_init == SinkInit::Normal ? "normal" : "zero"},
        {"loads_in_transformers", loads_in_transformers(c.sink_mode)}}},
  };
}

nlohmann::json hf_generation_config_json(const ModelConfig& c) {
  return {{"_from_model_config", true}, {"bos_token_id", id_or_null(c.bos_token_id)},
          {"eos_token_id", id_or_null(c.eos_token_id)}, {"pad_token_id", id_or_null(c.pad_token_id)}};
}

namespace {

class JsonReader {
 public:
  JsonReader(const nlohmann::json& json, std::string path) : json_(json), path_(std::move(path)) {}

  const nlohmann::json* find(const std::string& key) const {
    auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  const nlohmann::json& require(const std::string& key) const {
    const nlohmann::json* v = find(key);
    if (!v) fail(path_, ": missing field '", key, "'");
    return *v;
  }
  // Copies a JSON field into a config key, if present (or required).
  void copy(Config* config, const std::string& field, const std::string& key, bool required = true) const {
    const nlohmann::json* v = required ? &require(field) : find(field);
    if (!v) return;
    if (v->is_array()) v = v->empty() ? nullptr : &(*v)[0];  // eos_token_id may be a list
    if (!v) return;
    config->set(key, v->is_string() ? v->get<std::string>() : v->dump(), path_ + " field '" + field + "'");
  }

 private:
  const nlohmann::json& json_;
  std::string path_;
};

}  // namespace

Config config_from_hf_json(const nlohmann::json& json, const std::string& path) {
  JsonReader in(json, path);
  if (!json.is_object()) fail(path, ": must be a JSON object");
  std::string model_type = in.require("model_type").get<std::string>();
  if (model_type != "gpt_neox")
    fail(path, ": model_type is '", model_type, "'; sinklm loads GPT-NeoX (Pythia) checkpoints only");
  if (auto act = in.find("hidden_act"); act && *act != "gelu")
    fail(path, ": hidden_act ", act->dump(), " is not supported (sinklm implements exact GELU, \"gelu\")");
  if (auto tie = in.find("tie_word_embeddings"); tie && tie->get<bool>())
    fail(path, ": tie_word_embeddings=true is not supported (GPT-NeoX unties embed_in and embed_out)");
  if (auto bias = in.find("attention_bias"); bias && !bias->get<bool>())
    fail(path, ": attention_bias=false is not supported");

  Config config;
  config.set_source(path);
  in.copy(&config, "vocab_size", "model.vocab_size");
  in.copy(&config, "hidden_size", "model.hidden_size");
  in.copy(&config, "num_hidden_layers", "model.num_layers");
  in.copy(&config, "num_attention_heads", "model.num_heads");
  in.copy(&config, "intermediate_size", "model.intermediate_size");
  in.copy(&config, "max_position_embeddings", "model.max_position_embeddings", false);
  in.copy(&config, "layer_norm_eps", "model.layer_norm_eps", false);
  in.copy(&config, "use_parallel_residual", "model.parallel_residual", false);
  in.copy(&config, "bos_token_id", "model.bos_token_id", false);
  in.copy(&config, "eos_token_id", "model.eos_token_id", false);
  in.copy(&config, "pad_token_id", "model.pad_token_id", false);
  if (const nlohmann::json* rope = in.find("rope_parameters")) {
    JsonReader rope_in(*rope, path + " rope_parameters");
    if (auto type = rope_in.find("rope_type"); type && *type != "default")
      fail(path, ": rope_parameters.rope_type ", type->dump(), " is not supported (only \"default\")");
    rope_in.copy(&config, "rope_theta", "model.rotary_base", false);
    rope_in.copy(&config, "partial_rotary_factor", "model.rotary_pct", false);
  } else {
    if (in.find("rope_scaling")) fail(path, ": rope_scaling is not supported");
    in.copy(&config, "rotary_emb_base", "model.rotary_base", false);
    in.copy(&config, "rotary_pct", "model.rotary_pct", false);
  }
  if (const nlohmann::json* sink = in.find("sink")) {
    JsonReader sink_in(*sink, path + " sink");
    sink_in.copy(&config, "mode", "model.sink.mode");
    if (sink_in.require("mode") == "token") sink_in.copy(&config, "count", "model.sink.count");
    sink_in.copy(&config, "gate", "model.sink.gate", false);
    sink_in.copy(&config, "kv_init", "model.sink.kv_init", false);
    sink_in.copy(&config, "tokenizer_vocab_size", "model.tokenizer_vocab_size", false);
  } else {
    // A plain Hugging Face checkpoint: every row is a real (or padding) token.
    config.set("model.tokenizer_vocab_size", in.require("vocab_size").dump(), path);
  }
  return config;
}

}  // namespace sinklm
