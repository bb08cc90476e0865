// Budget arithmetic of the cache policies, checked against a literal simulation of eviction.
#include <gtest/gtest.h>

#include <deque>

#include "../model/model_test_support.h"
#include "decode/cache/kv_cache_policy.h"

namespace sinklm {
namespace {

using testing_support::tiny_config;
using testing_support::user_error_of;

// Appends stream positions one at a time, dropping the oldest entry after the first `sinks` when over budget.
std::vector<int64_t> simulate(int64_t sinks, int64_t budget, int64_t length) {
  std::deque<int64_t> held;
  for (int64_t t = 0; t < length; ++t) {
    held.push_back(t);
    if (static_cast<int64_t>(held.size()) > budget) held.erase(held.begin() + sinks);
  }
  return {held.begin(), held.end()};
}

TEST(KvCachePolicy, SinkWindowHoldsSinksPlusMostRecentWithinBudget) {
  SinkWindowCache cache(4, 8);
  EXPECT_EQ(cache.budget(), 8);
  EXPECT_EQ(cache.recent_capacity(), 4);
  EXPECT_EQ(cache.label(), "4+4");
  EXPECT_EQ(cache.held_positions(10), (std::vector<int64_t>{0, 1, 2, 3, 6, 7, 8, 9}));
  for (int64_t n = 0; n < 40; ++n) {
    EXPECT_EQ(cache.held_positions(n), simulate(4, 8, n)) << n;
    EXPECT_EQ(cache.entries_after(n), static_cast<int64_t>(simulate(4, 8, n).size())) << n;
    EXPECT_LE(cache.entries_after(n), cache.budget());
  }
}

TEST(KvCachePolicy, CachePositionOfTheNewTokenIsItsIndexInTheCache) {
  SinkWindowCache cache(4, 8);
  for (int64_t t = 0; t < 30; ++t) {
    auto held = cache.held_positions(t + 1);  // the cache right after appending token t
    EXPECT_EQ(held.back(), t);
    EXPECT_EQ(cache.cache_position(t), static_cast<int64_t>(held.size()) - 1) << t;
  }
}

TEST(KvCachePolicy, WindowIsSinkWindowWithoutSinks) {
  WindowCache window(6);
  SinkWindowCache zero_sinks(0, 6);
  for (int64_t n = 0; n < 20; ++n) {
    EXPECT_EQ(window.held_positions(n), zero_sinks.held_positions(n));
    EXPECT_EQ(window.held_positions(n), simulate(0, 6, n));
  }
}

TEST(KvCachePolicy, FullKeepsEverythingAndRefusesPastItsLimit) {
  FullCache full(5);
  EXPECT_EQ(full.held_positions(5), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  full.check_append(3, 2);
  auto message = user_error_of([&] { full.check_append(4, 2); });
  EXPECT_NE(message.find("at most 5"), std::string::npos) << message;
  EXPECT_NE(message.find("sink_window"), std::string::npos) << message;
}

TEST(KvCachePolicy, DefaultsAndValidationFromOptions) {
  auto vanilla = ModelConfig::from(tiny_config("none"));
  auto token = ModelConfig::from(tiny_config("token", {"model.sink.count=2", "model.tokenizer_vocab_size=60"}));
  CacheOptions o;
  o.window = 16;
  EXPECT_EQ(make_cache_policy(o, vanilla)->sinks(), 4);
  EXPECT_EQ(make_cache_policy(o, token)->sinks(), 2);
  o.sinks = 0;
  EXPECT_EQ(make_cache_policy(o, vanilla)->held_positions(30), WindowCache(16).held_positions(30));
  o.policy = "recompute";
  o.sinks = -1;
  EXPECT_TRUE(make_cache_policy(o, vanilla)->recomputes());
  EXPECT_EQ(make_cache_policy(o, vanilla)->sinks(), 0);  // a plain window
  EXPECT_EQ(make_cache_policy(o, token)->sinks(), 2);    // every re-encoded window starts with the sink tokens
  o.policy = "sink_window";
  o.sinks = 16;
  EXPECT_NE(user_error_of([&] { make_cache_policy(o, vanilla, "--sinks"); }).find("--sinks"), std::string::npos);
  o.policy = "sliding";
  EXPECT_NE(user_error_of([&] { make_cache_policy(o, vanilla); }).find("sink_window"), std::string::npos);
  EXPECT_NE(user_error_of([&] { parse_position_rule("absolute"); }).find("cache or stream"), std::string::npos);
}

}  // namespace
}  // namespace sinklm
