#include "export/hf_tokenizer_files.h"

#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "core/files/atomic_dir.h"
#include "data/io/read_file.h"
#include "data/tokenizers/hf_tokenizer_json.h"
#include "data/tokenizers/tokenizer_files.h"
#include "model/sink.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

using json = nlohmann::json;

// The text of token `id` in a tokenizer.json (an added token's content, else its vocabulary entry); null for -1.
json token_text(const json& tokenizer, int64_t id) {
  if (id < 0) return nullptr;
  for (const json& t : tokenizer["added_tokens"])
    if (t.value("id", int64_t{-1}) == id) return t["content"];
  for (const auto& [text, value] : tokenizer["model"]["vocab"].items())
    if (value.is_number_integer() && value.get<int64_t>() == id) return text;
  return nullptr;
}

// The sink tokens as special added tokens and a post-processor that puts them first.
void add_sink_tokens(json& tokenizer, const std::vector<int64_t>& sink_ids, const std::string& where) {
  json single = json::array(), special = json::object();
  for (size_t i = 0; i < sink_ids.size(); ++i) {
    const std::string text = sink_token_text(i, sink_ids.size());
    if (tokenizer["model"]["vocab"].contains(text) || !token_text(tokenizer, sink_ids[i]).is_null())
      fail(where, ": the tokenizer already has a token '", text, "' or id ", sink_ids[i],
           "; the sink token cannot be added to its tokenizer.json");
    tokenizer["added_tokens"].push_back({{"id", sink_ids[i]}, {"content", text}, {"single_word", false},
                                         {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                         {"special", true}});
    single.push_back({{"SpecialToken", {{"id", text}, {"type_id", 0}}}});
    special[text] = {{"id", text}, {"ids", {sink_ids[i]}}, {"tokens", {text}}};
  }
  json pair = single;
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  pair.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  pair.push_back({{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
  tokenizer["post_processor"] = {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair},
                                 {"special_tokens", special}};
}

}  // namespace

HfTokenizerFiles hf_tokenizer_files(const ModelConfig& model, int64_t trained_length, const std::string& tokenizer_file) {
  HfTokenizerFiles files;
  files.tokenizer = hf_tokenizer_json(tokenizer_file);
  if (!files.tokenizer.contains("added_tokens")) files.tokenizer["added_tokens"] = json::array();
  const std::vector<int64_t> sinks = sink_prefix(model);
  if (!sinks.empty()) add_sink_tokens(files.tokenizer, sinks, tokenizer_file);
  const json& t = files.tokenizer;
  files.tokenizer_config = {
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"model_max_length", trained_length},
      {"bos_token", sinks.empty() ? token_text(t, model.bos_token_id) : json(sink_token_text(0, sinks.size()))},
      {"eos_token", token_text(t, model.eos_token_id)},
      {"pad_token", token_text(t, model.pad_token_id)},
      {"unk_token", t["model"].value("unk_token", json())},
      {"clean_up_tokenization_spaces", false}};
  return files;
}

CheckpointTokenizer checkpoint_tokenizer(std::vector<std::string> files, const Config& config, const ModelConfig& model,
                                         HfView view) {
  CheckpointTokenizer tokenizer{std::move(files), std::nullopt};
  if (tokenizer.files.empty()) return tokenizer;
  try {
    tokenizer.hf = hf_tokenizer_files(model, config.get_int("train.seq_len"), tokenizer.files.front());
  } catch (const UserError& e) {
    if (view == HfView::Required) throw;
    std::cerr << "sinklm: note: no Hugging Face tokenizer.json in the checkpoints: " << e.what() << "\n";
  }
  return tokenizer;
}

void add_tokenizer_files(CheckpointWriter& writer, const CheckpointTokenizer& tokenizer) {
  for (const auto& file : tokenizer.files)
    writer.add_file(checkpoint_tokenizer_name(file),
                    [&](const std::string& path) { write_file_durable(path, read_file(file)); });
  if (!tokenizer.hf) return;
  writer.add_file("tokenizer.json",
                  [&](const std::string& path) { write_file_durable(path, tokenizer.hf->tokenizer.dump() + "\n"); });
  writer.add_file("tokenizer_config.json", [&](const std::string& path) {
    write_file_durable(path, tokenizer.hf->tokenizer_config.dump(2) + "\n");
  });
}

}  // namespace sinklm
