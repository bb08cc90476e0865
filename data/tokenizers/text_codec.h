// Text <-> token ids for serving and streaming evaluation, with a tokenizer chosen per checkpoint:
// a tokenizer file (data/tokenizers/tokenizer.h: tokenizer.json, vocab.json, *.tiktoken, SentencePiece *.model), or,
// for models without one, bytes (id = byte value; needs a vocabulary of at least 256 ids).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>


namespace sinklm {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;  // bytes; may end mid-character
  virtual std::string description() const = 0;
  virtual int64_t vocab_size() const = 0;  // ids in [0, vocab_size()) decode to text
};

// `tokenizer_path` empty: the tokenizer file found in `checkpoint_dir` (find_tokenizer_file,
// data/tokenizers/tokenizer_files.h), else bytes for a byte model (`tokenizer_vocab_size` 256); "bytes": bytes.
// UserError when the tokenizer's ids do not fit the model's `tokenizer_vocab_size`
// (ModelConfig::tokenizer_vocab_size), and when none is found for a model with more ids than bytes.
std::unique_ptr<TextCodec> load_text_codec(const std::string& tokenizer_path, const std::string& checkpoint_dir,
                                           int64_t tokenizer_vocab_size);

// Length of the longest prefix of `bytes` that ends on a UTF-8 character boundary.
size_t complete_utf8_prefix(std::string_view bytes);

}  // namespace sinklm
