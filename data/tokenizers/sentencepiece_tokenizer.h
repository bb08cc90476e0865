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
