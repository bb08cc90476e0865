// A vocabulary's added tokens (special tokens such as <|endoftext|>, </s>): cut out of the text before
// pre-tokenization, leftmost first and the longest at a place, and matched literally. Shared by the byte-level
// and the SentencePiece-style BPE of tokenizer.json files.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sinklm {

struct AddedToken {
  std::string content;  // raw UTF-8, matched literally in the input
  uint32_t id = 0;
  bool special = false;
};

// One stretch of input: an added token (added_id >= 0) or the text between two of them.
struct TextSpan {
  std::string_view text;
  int64_t added_id = -1;
};

class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);
  // The spans of `text` in order (text spans are never empty); they concatenate to `text`.
  std::vector<TextSpan> split(std::string_view text) const;

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<size_t>> by_first_byte_;  // indices into tokens_, longest first
};

// The special ids among added tokens, by the names the common vocabularies give them (-1: none):
//   end of text        <|endoftext|> (GPT-2, GPT-NeoX, Qwen2), <|end_of_text|> (Llama-3), </s> (SentencePiece)
//   beginning of text  <|begin_of_text|> (Llama-3), <s> (SentencePiece)
//   padding            <|padding|> (GPT-NeoX), <pad>
struct SpecialTokenIds {
  int64_t end_of_text = -1, begin_of_text = -1, padding = -1;
};
SpecialTokenIds special_ids_by_name(const std::vector<AddedToken>& tokens);

}  // namespace sinklm
