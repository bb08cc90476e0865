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

// The text of sink token `index` of `count`: "<|sink|>" for one, "<|sink_0|>", "<|sink_1|>", ... for several; the
// name the Hugging Face view (export/hf_tokenizer_files.h) and GGUF give a model's sink tokens.
std::string sink_token_text(size_t index, size_t count);
// Whether `content` is such a name. sinklm puts a model's sink tokens in front of every sequence itself, so a
// tokenizer.json read back leaves them out (read_added_tokens): its ids are then those of the tokenizer the
// model was trained with, and a prompt's literal "<|sink|>" is text, not the sink.
bool is_sink_token_text(const std::string& content);

}  // namespace sinklm
