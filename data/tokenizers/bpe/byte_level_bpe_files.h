// Readers for the three byte-level BPE vocabulary formats:
//  - Hugging Face tokenizer.json (tokenizer_json.h picks the family): model BPE, pre_tokenizer ByteLevel
//    (use_regex), or Split (Isolated; Llama-3, Qwen2, cl100k patterns) then ByteLevel without its regex,
//    normalizer null or NFC, added_tokens. Token strings are in GPT-2's byte-level alphabet; merges are
//    "a b" strings or [a, b] pairs, ranked by their order.
//  - vocab.json (token string -> id, byte-level alphabet) + merges.txt ("#version" line, then "a b" per
//    line, ranked by order). <|endoftext|> in vocab.json is treated as a special added token.
//  - tiktoken rank file: "<base64 of the token's bytes> <rank>" per line; rank = id = merge priority.
//    The file has no special tokens; <|endoftext|> gets the id after the highest rank (GPT-2's 50256).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "data/tokenizers/bpe/byte_level_bpe.h"

namespace sinklm {

ByteLevelBpeVocab read_hf_tokenizer_json(const nlohmann::json& root, const std::string& path);
ByteLevelBpeVocab read_vocab_and_merges(const std::string& vocab_json_path, const std::string& merges_txt_path);
ByteLevelBpeVocab read_tiktoken_ranks(const std::string& path);

}  // namespace sinklm
