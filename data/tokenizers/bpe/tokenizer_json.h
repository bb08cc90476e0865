// Hugging Face tokenizer.json files: which BPE family a file is, and the parts both families read alike.
//   byte-level (ByteLevelBpe, byte_level_bpe_files.h): pre_tokenizer ByteLevel, or Split then ByteLevel
//   SentencePiece-style (MetaspaceBpe, metaspace_bpe.h): pre_tokenizer Metaspace, or the normalizer
//     Prepend("▁") + Replace(" ", "▁") of Llama-2's exports; model.byte_fallback
// Anything else is refused naming the component (e.g. pre_tokenizer Whitespace, model WordPiece).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "data/tokenizers/bpe/added_tokens.h"
#include "data/tokenizers/tokenizer.h"

namespace sinklm {

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);
// The same from the file's JSON, already read (`path` names it in errors).
std::unique_ptr<Tokenizer> tokenizer_from_json(const nlohmann::json& root, const std::string& path);

// The file's JSON; UserError naming the path when it is not JSON.
nlohmann::json read_json_file_for_tokenizer(const std::string& path);
// model: type BPE, deterministic (no dropout), no subword prefix or suffix; UserError naming the key.
void check_bpe_model(const nlohmann::json& model, const std::string& path);
// added_tokens: content, id, special, without the special sink tokens of a Hugging Face view (added_tokens.h:
// is_sink_token_text); UserError for an empty one or the flags sinklm does not implement.
std::vector<AddedToken> read_added_tokens(const nlohmann::json& root, const std::string& path);
// One entry of model.merges: "left right" or [left, right].
std::pair<std::string, std::string> merge_pair(const nlohmann::json& entry, const std::string& path, size_t rank);

}  // namespace sinklm
