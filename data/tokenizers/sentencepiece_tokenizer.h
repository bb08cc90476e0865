// SentencePiece models through Debian's libsentencepiece, and training a small BPE vocabulary on a corpus
// (for CPU-scale models, where a 50k vocabulary would dominate the cost).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizers/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace sinklm {

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& model_path);
  ~SentencePieceTokenizer() override;

  TokenIds encode(std::string_view text) const override;
  std::string decode(const TokenIds& ids) const override;
  uint32_t vocab_size() const override;
  uint32_t end_of_text_id() const override;
  uint32_t begin_of_text_id() const override;
  int64_t padding_id() const override;
  std::string description() const override;

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

// One piece of a SentencePiece model, as a converter to another format needs it (Hugging Face tokenizer.json,
// GGUF's "llama" vocabulary): its text (spaces as U+2581), score (BPE: minus its merge rank) and kind.
struct SentencePiece {
  enum class Kind { Normal, Unknown, Control, Unused, Byte };
  std::string text;
  float score = 0;
  Kind kind = Kind::Normal;
};
// What a converter must know beyond the pieces; probed by encoding, since Debian's libsentencepiece does not
// expose the model's trainer and normaliser settings.
struct SentencePieceModel {
  std::vector<SentencePiece> pieces;  // by id
  bool bpe = true;                    // false: a unigram model (scores are log-probabilities, not -rank)
  bool dummy_prefix = false;          // "a" encodes as "▁a" (add_dummy_prefix)
  bool identity_normalization = true; // the text is not rewritten (NFKC, whitespace collapsing) before encoding
  int64_t unknown_id = -1, end_of_text_id = -1, begin_of_text_id = -1, padding_id = -1;
};
// UserError naming the path when it is no SentencePiece model.
SentencePieceModel read_sentencepiece_model(const std::string& model_path);

struct SentencePieceTrainingOptions {
  std::vector<std::string> input_files;  // plain text, one sentence per line
  std::string model_prefix;              // writes <prefix>.model and <prefix>.vocab
  int vocab_size = 8192;
  int threads = 0;                       // 0 = all hardware threads
  int64_t max_sentences = 2000000;       // sampled from the input
  uint64_t seed = 1234;
};

// A byte-fallback BPE model with identity normalisation and no whitespace rewriting, so that decoding
// gives back the exact input bytes; </s> (the end-of-text id) separates documents.
void train_sentencepiece_bpe(const SentencePieceTrainingOptions& options);

}  // namespace sinklm
