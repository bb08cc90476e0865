#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "data/corpus/corpus_split.h"
#include "core/seeded_random.h"
#include "data/corpus/text_cleaning.h"

namespace sinklm {
namespace {

TEST(CorpusSplit, DependsOnlyOnSeedAndIdAndFillsEverySplit) {
  std::vector<std::string> ids;
  for (int i = 0; i < 2000; ++i) ids.push_back("source/doc" + std::to_string(i));
  auto a = split_documents(ids, 1, {0.05, 0.05});
  EXPECT_EQ(a, split_documents(ids, 1, {0.05, 0.05}));
  EXPECT_NE(a, split_documents(ids, 2, {0.05, 0.05}));
  std::vector<std::string> more = ids;
  more.insert(more.begin(), "other/x");
  auto b = split_documents(more, 1, {0.05, 0.05});
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(a[i], b[i + 1]) << "adding a document moved " << ids[i];
  int validation = 0, test = 0;
  for (Split s : a) validation += s == Split::Validation, test += s == Split::Test;
  EXPECT_NEAR(validation, 100, 40);
  EXPECT_NEAR(test, 100, 40);
  auto tiny = split_documents({"a", "b", "c"}, 1, {0.01, 0.01});
  EXPECT_EQ(std::set<Split>(tiny.begin(), tiny.end()).size(), 3u);
  EXPECT_THROW(split_documents(ids, 1, {0.6, 0.5}), UserError);
}

TEST(SeededRandom, PermutationIsAPermutationAndSeeded) {
  auto p = seeded_permutation(1000, 9);
  EXPECT_EQ(std::set<uint64_t>(p.begin(), p.end()).size(), 1000u);
  EXPECT_EQ(*std::max_element(p.begin(), p.end()), 999u);
  EXPECT_EQ(p, seeded_permutation(1000, 9));
  EXPECT_NE(p, seeded_permutation(1000, 10));
}

TEST(TextCleaning, NormalisesWhitespaceAndEncoding) {
  EXPECT_EQ(normalize_whitespace("\n\n a\tb  \r\nc\r\n\n\n\nd\x01\n\n"), " a b\nc\n\nd\n");
  EXPECT_EQ(normalize_whitespace(" \n\t\n"), "");
  EXPECT_EQ(as_utf8("caf\xe9"), "caf\xc3\xa9");
  EXPECT_EQ(as_utf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(dedent("  a\n\tb\n"), "a\nb\n");
}

TEST(TextCleaning, StripsDictionaryAndRstMarkup) {
  EXPECT_EQ(strip_dictionary_markup("Abdomen \\Ab*do\"men\\, n. See {belly}.\n[1913 Webster]\n"),
            "Abdomen, n. See belly.\n");
  EXPECT_EQ(strip_dictionary_markup("Abaca  ([a^]b\"[.a]*k[.a]), n. [The native name.]\n"),
            "Abaca, n. [The native name.]\n");
  EXPECT_EQ(strip_rst_markup(".. SPDX-License-Identifier: GPL-2.0\n=====\nTitle\n=====\nSee :ref:`the docs <docs>` and "
                             "``x = 1`` or `link`_ **now**.\n"),
            "Title\nSee the docs and x = 1 or link now.\n");
}

}  // namespace
}  // namespace sinklm
