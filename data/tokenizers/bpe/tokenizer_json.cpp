#include "data/tokenizers/bpe/tokenizer_json.h"

#include "core/error.h"
#include "data/io/read_file.h"
#include "data/tokenizers/bpe/byte_level_bpe_files.h"
#include "data/tokenizers/bpe/metaspace_bpe.h"

namespace sinklm {
namespace {

using json = nlohmann::json;

// Whether `component` is of `type`, or a Sequence with a step of that type.
bool has_component(const json& component, const char* type, const char* list_key) {
  if (!component.is_object()) return false;
  if (component.value("type", "") == type) return true;
  for (const json& step : component.value(list_key, json::array()))
    if (step.is_object() && step.value("type", "") == type) return true;
  return false;
}

}  // namespace

json read_json_file_for_tokenizer(const std::string& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
}

void check_bpe_model(const json& model, const std::string& path) {
  if (model.value("type", "") != "BPE")
    fail(path, ": model type '", model.value("type", "missing"), "' is not supported (sinklm reads BPE models)");
  for (const char* unsupported : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(unsupported) && !model[unsupported].is_null() && model[unsupported] != "")
      fail(path, ": model.", unsupported, " is set, which sinklm does not implement");
  if (model.contains("dropout") && !model["dropout"].is_null())
    fail(path, ": model.dropout is set; sinklm encodes deterministically (set it to null)");
}

std::vector<AddedToken> read_added_tokens(const json& root, const std::string& path) {
  std::vector<AddedToken> tokens;
  for (const json& t : root.value("added_tokens", json::array())) {
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      if (t.value(flag, false))
        fail(path, ": added token '", t.value("content", ""), "' sets ", flag, ", which sinklm does not support");
    AddedToken token{t.at("content").get<std::string>(), t.at("id").get<uint32_t>(), t.value("special", false)};
    if (token.content.empty()) fail(path, ": added token ", token.id, " is empty");
    if (token.special && is_sink_token_text(token.content)) continue;  // a model's sink: sinklm places it itself
    tokens.push_back(std::move(token));
  }
  return tokens;
}

std::pair<std::string, std::string> merge_pair(const json& m, const std::string& path, size_t rank) {
  if (m.is_string()) {
    const std::string line = m.get<std::string>();
    const size_t space = line.find(' ');
    if (space == std::string::npos) fail(path, ": merge ", rank, " '", line, "' is not 'left right'");
    return {line.substr(0, space), line.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  fail(path, ": merge ", rank, " is neither 'left right' nor [left, right]");
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  return tokenizer_from_json(read_json_file_for_tokenizer(path), path);
}

std::unique_ptr<Tokenizer> tokenizer_from_json(const json& root, const std::string& path) {
  if (!root.is_object()) fail(path, ": not a tokenizer.json (expected a JSON object)");
  const json& pre = root.value("pre_tokenizer", json());
  const json& normalizer = root.value("normalizer", json());
  const bool sentencepiece_style = has_component(pre, "Metaspace", "pretokenizers") ||
                                   has_component(normalizer, "Prepend", "normalizers") ||
                                   root.value("model", json()).value("byte_fallback", false);
  if (sentencepiece_style) return MetaspaceBpe::from_tokenizer_json(root, path);
  return std::make_unique<ByteLevelBpe>(read_hf_tokenizer_json(root, path));
}

}  // namespace sinklm
