// A text tokenizer: UTF-8 (or arbitrary) bytes to token ids and back. Implementations: ByteLevelBpe
// (GPT-2 / GPT-NeoX / tiktoken rank files) and SentencePieceTokenizer. load_tokenizer() picks one from the
// file it is given.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sinklm {

using TokenIds = std::vector<uint32_t>;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Thread-safe: several threads may encode with one tokenizer at once.
  virtual TokenIds encode(std::string_view text) const = 0;
  // One large text using up to `threads` threads; the ids equal encode(text).
  virtual TokenIds encode_large(std::string_view text, int threads) const;
  virtual std::string decode(const TokenIds& ids) const = 0;

  // Ids are in [0, vocab_size()).
  virtual uint32_t vocab_size() const = 0;
  // The id that separates documents in token shards: config.json's eos_token_id, where generation stops.
  virtual uint32_t end_of_text_id() const = 0;
  // The id that begins a text where the tokenizer has one (Llama-3's <|begin_of_text|>, SentencePiece's <s>),
  // else end_of_text_id(): GPT-2 and GPT-NeoX begin and end a text with one <|endoftext|>.
  virtual uint32_t begin_of_text_id() const { return end_of_text_id(); }
  // The padding id (GPT-NeoX's <|padding|>, SentencePiece's <pad>), -1 when the tokenizer has none.
  virtual int64_t padding_id() const { return -1; }
  // One line for logs and manifests, e.g. "byte-level BPE, 50257 ids, from gpt2.tiktoken".
  virtual std::string description() const = 0;
};

// tokenizer.json (Hugging Face), vocab.json (with merges.txt beside it), *.tiktoken (rank file) or
// *.model (SentencePiece). UserError naming the path when it is none of these or is malformed.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// Encode many documents on `threads` threads (0 = all hardware threads); result i belongs to docs[i].
std::vector<TokenIds> encode_documents(const Tokenizer& tokenizer, const std::vector<std::string_view>& docs,
                                       int threads);

// 0 -> std::thread::hardware_concurrency(), at least 1.
int resolve_thread_count(int threads);

}  // namespace sinklm
