#include "data/tokenizers/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "test_dir.h"

namespace sinklm {
namespace {

TEST(SentencePiece, TrainsASmallBpeVocabularyThatRoundTripsExactly) {
  testing::TestDir dir;
  const std::vector<std::string> words = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and",
                                          "runs", "away", "from", "hunter", "in", "forest", "at", "night"};
  std::mt19937 rng(3);
  std::string text;
  for (int line = 0; line < 3000; ++line) {
    for (int w = 0; w < 12; ++w) text += (w ? " " : "") + words[rng() % words.size()];
    text += line % 7 == 0 ? ".\n" : "\n";
  }
  write_file_durable(dir / "train.txt", text);
  SentencePieceTrainingOptions options;
  options.input_files = {dir / "train.txt"};
  options.model_prefix = dir / "spm";
  options.vocab_size = 400;
  options.threads = 2;
  train_sentencepiece_bpe(options);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir / "spm.model");
  EXPECT_EQ(tokenizer->vocab_size(), 400u);
  const std::string sample = "the lazy dog  runs\naway, ünïcödé 12345 and \xe2\x82\xac!\n";
  TokenIds ids = tokenizer->encode(sample);
  EXPECT_LT(ids.size(), sample.size());
  EXPECT_EQ(tokenizer->decode(ids), sample);
  EXPECT_LT(tokenizer->encode("the quick brown fox").size(), 8u) << "common words become single pieces";
  EXPECT_THROW(tokenizer->decode({400}), UserError);
}

TEST(SentencePiece, ANonModelFileIsAClearError) {
  testing::TestDir dir;
  write_file_durable(dir / "bad.model", std::string("not a model"));
  try {
    load_tokenizer(dir / "bad.model");
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sinklm
