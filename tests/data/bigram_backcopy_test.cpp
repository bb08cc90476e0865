// The synthetic Bigram-Backcopy source (data/synthetic/bigram_backcopy.h): seeded, its copy rules hold on every
// trigger, its log-probabilities are those of the process that drew the tokens, and bad options name the flag.
#include "data/synthetic/bigram_backcopy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"

namespace sinklm {
namespace {

bool is_trigger(const BigramBackcopy& source, uint32_t id) {
  return source.triggers().find(static_cast<char>(id)) != std::string::npos;
}

TEST(BigramBackcopy, SameSeedSameStreamOtherSeedOtherStream) {
  BigramBackcopy source(BigramBackcopyOptions{});
  EXPECT_EQ(source.generate(5000, 7).ids, source.generate(5000, 7).ids);
  EXPECT_NE(source.generate(5000, 7).ids, source.generate(5000, 8).ids);
  BigramBackcopyOptions other;
  other.seed = 2;
  EXPECT_NE(BigramBackcopy(other).generate(5000, 7).ids, source.generate(5000, 7).ids);
}

TEST(BigramBackcopy, EveryTriggerIsFollowedByItsCopy) {
  BigramBackcopyOptions options;
  options.triggers = 3;
  BigramBackcopy source(options);
  SyntheticStream s = source.generate(50000, 1);
  uint64_t triggers = 0;
  for (size_t t = 0; t + 1 < s.ids.size(); ++t) {
    const size_t j = source.triggers().find(static_cast<char>(s.ids[t]));
    if (j == std::string::npos) continue;
    ++triggers;
    ASSERT_GE(t, j + 1);
    EXPECT_EQ(s.ids[t + 1], s.ids[t - 1 - j]) << "trigger " << j << " at " << t;
    EXPECT_FALSE(is_trigger(source, s.ids[t + 1]));
    EXPECT_EQ(s.log_prob[t + 1], 0.0f);
  }
  EXPECT_NEAR(static_cast<double>(triggers) / s.ids.size(), s.copy_fraction(), 1e-4);
  EXPECT_GT(s.copy_fraction(), 0.08);
}

TEST(BigramBackcopy, AfterMarkerCopiesTheTokenAfterTheMostRecentMarker) {
  BigramBackcopyOptions options;
  options.rule = CopyRule::AfterMarker;
  options.triggers = 1;
  BigramBackcopy source(options);
  SyntheticStream s = source.generate(50000, 1);
  int64_t last_marker = -1, checked = 0;
  for (size_t t = 0; t + 1 < s.ids.size(); ++t) {
    if (s.ids[t] == '@') last_marker = static_cast<int64_t>(t);
    if (!is_trigger(source, s.ids[t])) continue;
    ASSERT_GE(last_marker, 0);
    EXPECT_LE(static_cast<int64_t>(t) - last_marker, options.marker_window);
    EXPECT_EQ(s.ids[t + 1], s.ids[last_marker + 1]);
    ++checked;
  }
  EXPECT_GT(checked, 1000);
}

// The stored log-probabilities are a proper conditional distribution: summed over what can follow an
// ordinary symbol they give 1, so the oracle loss is the true entropy rate of the stream.
TEST(BigramBackcopy, LogProbabilitiesMatchTheEmpiricalFrequencies) {
  BigramBackcopy source(BigramBackcopyOptions{});
  SyntheticStream s = source.generate(400000, 3);
  // For the most common context symbol, compare each successor's frequency with exp(stored log-prob).
  std::map<uint32_t, std::map<uint32_t, std::pair<int64_t, double>>> next;  // context -> next -> (count, p)
  for (size_t t = 1; t < s.ids.size(); ++t) {
    if (is_trigger(source, s.ids[t - 1]) || t < 3) continue;
    auto& cell = next[s.ids[t - 1]][s.ids[t]];
    ++cell.first;
    if (!is_trigger(source, s.ids[t]) && !is_trigger(source, s.ids[t - 2]) && !is_trigger(source, s.ids[t - 3]))
      cell.second = std::exp(static_cast<double>(s.log_prob[t]));  // both triggers eligible: the common case
  }
  const auto& [context, successors] = *next.begin();
  int64_t total = 0;
  for (const auto& [id, cell] : successors) total += cell.first;
  for (const auto& [id, cell] : successors) {
    if (is_trigger(source, id) || cell.second == 0) continue;
    EXPECT_NEAR(static_cast<double>(cell.first) / total, cell.second, 0.02) << "context " << context << " next " << id;
  }
  EXPECT_GT(s.mean_nll(), 1.0);
  EXPECT_LT(s.mean_nll(), std::log(48.0));
}

TEST(BigramBackcopy, DocumentsAreFreshStreamsOfDrawnLengthsThatAddUpToTheTotal) {
  BigramBackcopy source(BigramBackcopyOptions{});
  const std::vector<SyntheticStream> documents = source.generate_documents(10000, 48, 3);
  uint64_t total = 0;
  std::map<size_t, int> lengths;
  for (size_t i = 0; i < documents.size(); ++i) {
    const SyntheticStream& d = documents[i];
    total += d.ids.size();
    if (i + 1 < documents.size()) {  // the last one is cut to the total
      EXPECT_GE(d.ids.size(), 24u);
      EXPECT_LE(d.ids.size(), 72u);
      ++lengths[d.ids.size()];
    }
    // Each document starts afresh: its first token is drawn uniformly and no trigger copies from before it.
    EXPECT_FLOAT_EQ(d.log_prob[0], -std::log(48.0f));
    EXPECT_FALSE(is_trigger(source, d.ids[0]));
  }
  EXPECT_EQ(total, 10000u);
  EXPECT_GT(lengths.size(), 20u) << "lengths are drawn, not fixed";
  EXPECT_NE(documents[0].ids, documents[1].ids);
  EXPECT_EQ(source.generate_documents(10000, 48, 3)[5].ids, documents[5].ids);
  EXPECT_NE(source.generate_documents(10000, 48, 4)[5].ids, documents[5].ids);
}

TEST(BigramBackcopy, BadOptionsNameTheFlag) {
  auto error_of = [](BigramBackcopyOptions o) {
    try {
      BigramBackcopy source(o);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  BigramBackcopyOptions o;
  o.symbols = 100;
  EXPECT_NE(error_of(o).find("--symbols"), std::string::npos);
  o = {};
  o.triggers = 9;
  EXPECT_NE(error_of(o).find("--triggers"), std::string::npos);
  o = {};
  o.trigger_rate = 1.5;
  EXPECT_NE(error_of(o).find("--trigger-rate"), std::string::npos);
  o = {};
  o.rule = CopyRule::AfterMarker;
  o.marker_rate = 0.9;
  EXPECT_NE(error_of(o).find("--marker-rate"), std::string::npos);
  try {
    BigramBackcopy(BigramBackcopyOptions{}).generate_documents(100, 1, 0);
    ADD_FAILURE() << "a 1-token mean document length was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--document-tokens"), std::string::npos);
  }
}

}  // namespace
}  // namespace sinklm
