#include "data/tokenizers/text_codec.h"

#include <filesystem>

#include "core/error.h"
#include "data/tokenizers/tokenizer.h"
#include "data/tokenizers/tokenizer_files.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

class ByteCodec : public TextCodec {
 public:
  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int64_t> ids;
    ids.reserve(text.size());
    for (unsigned char ch : text) ids.push_back(ch);
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    for (int64_t id : ids)
      if (id >= 0 && id < 256) text.push_back(static_cast<char>(id));
    return text;
  }
  std::string description() const override { return "bytes (id = byte value)"; }
  int64_t vocab_size() const override { return 256; }
};

class TokenizerCodec : public TextCodec {
 public:
  explicit TokenizerCodec(std::unique_ptr<Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {}
  std::vector<int64_t> encode(std::string_view text) const override {
    auto ids = tokenizer_->encode(text);
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    TokenIds real;
    for (int64_t id : ids)
      if (id >= 0 && id < static_cast<int64_t>(tokenizer_->vocab_size())) real.push_back(static_cast<uint32_t>(id));
    return tokenizer_->decode(real);
  }
  std::string description() const override { return tokenizer_->description(); }
  int64_t vocab_size() const override { return tokenizer_->vocab_size(); }

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace

std::unique_ptr<TextCodec> load_text_codec(const std::string& tokenizer_path, const std::string& checkpoint_dir,
                                           int64_t tokenizer_vocab_size) {
  const std::string path = tokenizer_path.empty() ? find_tokenizer_file(checkpoint_dir) : tokenizer_path;
  if (path.empty() || path == "bytes") {
    if (tokenizer_vocab_size < 256)
      fail("no tokenizer: ", checkpoint_dir, " has none and the model's vocabulary (", tokenizer_vocab_size,
           ") is too small for bytes; pass --tokenizer PATH or token ids (--ids)");
    // A model with more ids than bytes was trained with a tokenizer: reading its ids as bytes would score at
    // chance and reply in gibberish, so that takes an explicit --tokenizer bytes.
    if (path.empty() && tokenizer_vocab_size > 256)
      fail("no tokenizer: ", checkpoint_dir, " holds none and its model has ", tokenizer_vocab_size,
           " token ids, more than bytes' 256; pass --tokenizer PATH (the tokenizer it was trained with), "
           "or --tokenizer bytes to read ids as bytes anyway");
    return std::make_unique<ByteCodec>();
  }
  auto tokenizer = load_tokenizer(path);
  if (tokenizer->vocab_size() > static_cast<uint32_t>(tokenizer_vocab_size))
    fail("--tokenizer ", path, ": ", tokenizer->vocab_size(), " ids do not fit the model's tokenizer vocabulary (",
         tokenizer_vocab_size, ")");
  return std::make_unique<TokenizerCodec>(std::move(tokenizer));
}

size_t complete_utf8_prefix(std::string_view bytes) {
  // Walk back over at most 3 continuation bytes to the last lead byte; keep it only if its sequence is whole.
  size_t end = bytes.size(), i = end;
  int continuation = 0;
  while (i > 0 && continuation < 4 && (static_cast<unsigned char>(bytes[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++continuation;
  }
  if (i == 0) return continuation ? 0 : end;
  const unsigned char lead = bytes[i - 1];
  const int need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
  if (lead < 0x80 || continuation >= need) return end;  // ASCII, or a complete (or invalid, passed on) sequence
  return i - 1;
}

}  // namespace sinklm
