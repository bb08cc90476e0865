// Token names in logprobs: text when valid UTF-8, else OpenAI's bytes:\xNN spelling; unique per position.
#include <gtest/gtest.h>

#include "serve/api/token_names.h"

namespace sinklm {
namespace {

TEST(TokenNames, ValidTextIsItselfAndOtherBytesAreSpelledOut) {
  EXPECT_EQ(token_name("Hello"), "Hello");
  EXPECT_EQ(token_name(" caf\xc3\xa9"), " caf\xc3\xa9");
  EXPECT_EQ(token_name(""), "");
  EXPECT_EQ(token_name("\xe2\x80"), "bytes:\\xe2\\x80");      // the first two bytes of U+2019
  EXPECT_EQ(token_name("\x99"), "bytes:\\x99");
  EXPECT_EQ(token_name(" \xf0\x9f"), "bytes:\\x20\\xf0\\x9f");  // every byte, the valid ones too
  EXPECT_EQ(token_name("\xed\xa0\x80"), "bytes:\\xed\\xa0\\x80");  // a surrogate is not valid UTF-8
  EXPECT_EQ(token_name(std::string("\0", 1)), std::string("\0", 1));
}

// Text that looks like a bytes or id name is spelled out, so a name always stands for one byte string.
TEST(TokenNames, TextThatLooksLikeAnotherFormIsSpelledOut) {
  EXPECT_EQ(token_name("bytes:\\x99"), "bytes:\\x62\\x79\\x74\\x65\\x73\\x3a\\x5c\\x78\\x39\\x39");
  EXPECT_EQ(token_name("token_id:7"), "bytes:\\x74\\x6f\\x6b\\x65\\x6e\\x5f\\x69\\x64\\x3a\\x37");
  EXPECT_EQ(token_name("bytes"), "bytes");
  EXPECT_NE(token_name("bytes:\\x99"), token_name("\x99"));
}

TEST(TokenNames, EqualBytesAtOnePositionGetDistinctNamesTheLikeliestKeepingItsText) {
  using T = std::vector<std::pair<int64_t, std::string>>;
  using N = std::vector<std::string>;
  EXPECT_EQ(position_names(T{{5, "a"}, {9, "\xc3"}, {7, "a"}, {3, "\xc3"}, {8, "b"}}),
            (N{"a", "bytes:\\xc3", "token_id:7", "token_id:3", "b"}));
  // The chosen token, listed again after the alternatives, keeps its alternative's name...
  EXPECT_EQ(position_names(T{{7, "a"}, {5, "a"}, {5, "a"}}), (N{"a", "token_id:5", "token_id:5"}));
  // ... and one outside them never takes an alternative's name.
  EXPECT_EQ(position_names(T{{7, "a"}, {4, "x"}, {5, "a"}}), (N{"a", "x", "token_id:5"}));
}

}  // namespace
}  // namespace sinklm
