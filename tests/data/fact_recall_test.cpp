// The recall source (data/synthetic/fact_recall.h): seeded; every query's answer is the value of its key's
// latest fact, at the recorded distance; probe streams plant facts exactly d before their queries with no
// other use of the key between; log-probabilities are those of the process; bad options name the flag.
#include "data/synthetic/fact_recall.h"

#include <gtest/gtest.h>

#include <cctype>
#include <map>

#include "core/error.h"

namespace sinklm {
namespace {

// The value each query's key had at its latest fact before the query: what the answer must be.
void expect_answers_are_latest_facts(const RecallStream& s, int64_t expected_distance) {
  std::map<uint32_t, std::pair<int64_t, uint32_t>> latest;  // key -> (key position, value)
  size_t next_query = 0;
  for (size_t t = 0; t + 2 < s.ids.size(); ++t) {
    if (s.ids[t] == FactRecall::kFactMarker) {
      latest[s.ids[t + 1]] = {static_cast<int64_t>(t + 1), s.ids[t + 2]};
    } else if (s.ids[t] == FactRecall::kQueryMarker) {
      ASSERT_LT(next_query, s.queries.size());
      const RecallQuery& q = s.queries[next_query++];
      EXPECT_EQ(q.answer, static_cast<int64_t>(t + 2));
      ASSERT_TRUE(latest.count(s.ids[t + 1])) << "a query at " << t << " for a key never stated";
      const auto [key_position, value] = latest[s.ids[t + 1]];
      EXPECT_EQ(s.ids[t + 2], value) << "query at " << t;
      EXPECT_EQ(q.distance, static_cast<int64_t>(t + 1) - key_position);
      if (expected_distance > 0) EXPECT_EQ(q.distance, expected_distance);
      EXPECT_FALSE(s.filler[t] || s.filler[t + 1] || s.filler[t + 2]);
    }
  }
  EXPECT_EQ(next_query, s.queries.size());
}

TEST(FactRecall, QueriesAnswerTheirKeysLatestFactWithinTheDistanceRange) {
  FactRecallOptions options;
  options.max_distance = 120;
  FactRecall source(options);
  const RecallStream s = source.generate(40000, 1);
  ASSERT_EQ(s.ids.size(), 40000u);
  expect_answers_are_latest_facts(s, 0);
  EXPECT_GT(s.queries.size(), 400u);
  int64_t shortest = 1 << 30, longest = 0;
  for (const RecallQuery& q : s.queries) shortest = std::min(shortest, q.distance), longest = std::max(longest, q.distance);
  EXPECT_GE(shortest, options.min_distance);
  EXPECT_LE(longest, options.max_distance);
  EXPECT_GT(longest, options.max_distance * 3 / 4) << "distances spread over the range";
  double mean = 0;
  for (const RecallQuery& q : s.queries) mean += static_cast<double>(q.distance) / static_cast<double>(s.queries.size());
  EXPECT_NEAR(mean, (options.min_distance + options.max_distance) / 2.0, 4.0) << "drawn uniformly";
  for (size_t t = 0; t < s.ids.size(); ++t)
    if (s.filler[t]) EXPECT_TRUE(std::islower(static_cast<int>(s.ids[t]))) << t;
  EXPECT_EQ(source.generate(40000, 1).ids, s.ids);
  EXPECT_NE(source.generate(40000, 2).ids, s.ids);
}

TEST(FactRecall, AnswersAreCertainAndFactsOnlyAsLikelyAsTheirDraw) {
  FactRecall source(FactRecallOptions{});
  const RecallStream s = source.generate(20000, 3);
  for (const RecallQuery& q : s.queries) EXPECT_EQ(s.log_prob[q.answer], 0.0f);
  for (size_t t = 0; t + 2 < s.ids.size(); ++t)
    if (s.ids[t] == FactRecall::kFactMarker) EXPECT_NEAR(s.log_prob[t + 2], -std::log(24.0), 1e-5);
  // The oracle's loss lies between the filler chain's entropy scale and uniform guessing.
  EXPECT_GT(s.mean_nll(), 0.5);
  EXPECT_LT(s.mean_nll(), std::log(24.0));
}

TEST(FactRecall, ProbeStreamsAskEveryFactExactlyDistanceLater) {
  FactRecall source(FactRecallOptions{});
  for (int64_t d : {4, 9, 16, 63, 64, 100, 257}) {
    const RecallStream s = source.probe(d, 40, 64, 8, 5);
    ASSERT_EQ(s.queries.size(), 40u) << d;
    expect_answers_are_latest_facts(s, d);
    EXPECT_GE(s.queries.front().answer - 1 - d, 64) << "the first fact comes after the lead";
    EXPECT_EQ(static_cast<int64_t>(s.ids.size()), s.queries.back().answer + 1 + 8);
  }
}

TEST(FactRecall, BadOptionsNameTheFlag) {
  auto error_of = [](FactRecallOptions o) {
    try {
      FactRecall source(o);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  FactRecallOptions o;
  o.symbols = 30;
  EXPECT_NE(error_of(o).find("--symbols"), std::string::npos);
  o = {};
  o.keys = 27;
  EXPECT_NE(error_of(o).find("--keys"), std::string::npos);
  o = {};
  o.fact_rate = 0.6;
  EXPECT_NE(error_of(o).find("--fact-rate"), std::string::npos);
  o = {};
  o.min_distance = 2;
  EXPECT_NE(error_of(o).find("--min-distance"), std::string::npos);
  EXPECT_THROW(FactRecall(FactRecallOptions{}).probe(3, 4, 8, 0, 0), UserError);
  const nlohmann::json partial = {{"symbols", 24}};
  try {
    recall_options_from_json(partial, "m.json");
    ADD_FAILURE() << "a manifest without its keys was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("m.json: synthetic.recall.successors"), std::string::npos) << e.what();
  }
  EXPECT_EQ(recall_options_from_json(recall_options_json(o), "m").min_distance, 2);
}

}  // namespace
}  // namespace sinklm
