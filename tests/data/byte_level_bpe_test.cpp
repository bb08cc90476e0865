#include "data/tokenizers/bpe/byte_level_bpe.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "data/tokenizers/bpe/byte_level_alphabet.h"
#include "data/tokenizers/bpe/regex_pretokenizer.h"

namespace sinklm {
namespace {

std::vector<std::string> pieces(const std::string& text) {
  RegexPreTokenizer pre;
  std::vector<std::string> out;
  for (auto p : pre.split(text)) out.emplace_back(p);
  return out;
}

TEST(RegexPreTokenizer, SplitsLikeGpt2sPattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("it's  fine!!"), (V{"it", "'s", " ", " fine", "!!"}));
  EXPECT_EQ(pieces("a\n\nb"), (V{"a", "\n", "\n", "b"}));  // only a space may lead a word
  EXPECT_EQ(pieces("x   "), (V{"x", "   "}));
  EXPECT_EQ(pieces("1234 ١٢"), (V{"1234", " ١٢"}));
  EXPECT_EQ(pieces("café ok"), (V{"café", " ok"}));
  // U+180E (a format character since Unicode 6.3) is not White_Space; U+3000 is.
  EXPECT_EQ(pieces("a\u180e b"), (V{"a", "\u180e", " b"}));
  EXPECT_EQ(pieces("a\u3000\u3000b"), (V{"a", "\u3000", "\u3000", "b"}));
}

TEST(RegexPreTokenizer, InvalidBytesAreOtherCharactersAndPiecesCoverTheInput) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("ab\xff\xfe!cd"), (V{"ab", "\xff\xfe!", "cd"}));
  EXPECT_EQ(pieces("caf\xc3"), (V{"caf", "\xc3"}));
  std::mt19937 rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    for (int i = 0; i < 64; ++i) text.push_back(static_cast<char>(rng() % 256));
    std::string joined;
    for (const auto& p : pieces(text)) joined += p;
    ASSERT_EQ(joined, text);
  }
}

// A toy vocabulary: the 256 bytes (ids 0-255 = byte values) and a few merges, in rank order.
ByteLevelBpeVocab toy_vocab() {
  ByteLevelBpeVocab v;
  v.source = "toy";
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(std::string(1, static_cast<char>(b)), b);
  auto add = [&](const std::string& left, const std::string& right, uint32_t id) {
    auto id_of = [&](const std::string& s) {
      for (const auto& [bytes, i] : v.tokens)
        if (bytes == s) return i;
      throw std::logic_error("no token " + s);
    };
    v.merges.push_back(MergeRule{id_of(left), id_of(right), id, static_cast<uint32_t>(v.merges.size())});
    v.tokens.emplace_back(left + right, id);
  };
  add("a", "a", 256);   // rank 0
  add("b", "c", 257);   // rank 1
  add("aa", "bc", 258); // rank 2
  add("c", "d", 259);   // rank 3: loses to b+c in "bcd"
  v.added_tokens.push_back(AddedToken{"<|endoftext|>", 260, true});
  v.added_tokens.push_back(AddedToken{"<|end", 261, false});
  return v;
}

TEST(ByteLevelBpe, MergesLowestRankFirstLeftmostOnTies) {
  ByteLevelBpe bpe(toy_vocab());
  EXPECT_EQ(bpe.encode("aaa"), (TokenIds{256, 'a'}));       // leftmost pair first
  EXPECT_EQ(bpe.encode("aaaa"), (TokenIds{256, 256}));
  EXPECT_EQ(bpe.encode("aabc"), (TokenIds{258}));
  EXPECT_EQ(bpe.encode("bcd"), (TokenIds{257, 'd'}));       // rank 1 beats rank 3
  EXPECT_EQ(bpe.encode("cd"), (TokenIds{259}));
  EXPECT_EQ(bpe.vocab_size(), 262u);
  EXPECT_EQ(bpe.end_of_text_id(), 260u);
}

TEST(ByteLevelBpe, AddedTokensMatchLeftmostLongest) {
  ByteLevelBpe bpe(toy_vocab());
  EXPECT_EQ(bpe.encode("aa<|endoftext|>aa"), (TokenIds{256, 260, 256}));
  EXPECT_EQ(bpe.encode("<|end"), (TokenIds{261}));
  EXPECT_EQ(bpe.encode("<|endo"), (TokenIds{261, 'o'}));
  EXPECT_EQ(bpe.decode({256, 260, 259}), "aa<|endoftext|>cd");
  EXPECT_THROW(bpe.decode({262}), UserError);
}

TEST(ByteLevelBpe, AnyBytesRoundTripAndParallelEncodingEqualsSerial) {
  ByteLevelBpe bpe(toy_vocab());
  std::mt19937 rng(2);
  const std::string alphabet = "aabcd  \n\t!1\xc3\xa9\xff";
  std::string text;
  for (int i = 0; i < 5'000'000; ++i) text.push_back(alphabet[rng() % alphabet.size()]);
  TokenIds serial = bpe.encode(text);
  EXPECT_EQ(bpe.decode(serial), text);
  EXPECT_EQ(bpe.encode_large(text, 4), serial);
  std::string random_bytes;
  for (int i = 0; i < 100000; ++i) random_bytes.push_back(static_cast<char>(rng() % 256));
  EXPECT_EQ(bpe.decode(bpe.encode(random_bytes)), random_bytes);
}

TEST(ByteLevelBpe, RejectsVocabulariesItCannotEncodeWith) {
  ByteLevelBpeVocab no_eot = toy_vocab();
  no_eot.added_tokens.clear();
  EXPECT_THROW(ByteLevelBpe{no_eot}, UserError);
  ByteLevelBpeVocab missing_byte = toy_vocab();
  missing_byte.tokens.erase(missing_byte.tokens.begin() + 'q');
  EXPECT_THROW(ByteLevelBpe{missing_byte}, UserError);
}

TEST(ByteLevelAlphabet, MapsEveryByteToOnePrintableCharacterAndBack) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string text = bytes_to_alphabet(all);
  EXPECT_EQ(bytes_to_alphabet(" "), "\u0120");  // GPT-2's "Ġ"
  EXPECT_EQ(bytes_to_alphabet("\n"), "\u010a");  // "Ċ"
  EXPECT_EQ(bytes_to_alphabet("A"), "A");
  EXPECT_EQ(alphabet_to_bytes(text), all);
  EXPECT_FALSE(alphabet_to_bytes(" ").has_value());
}

}  // namespace
}  // namespace sinklm
