#include "data/shards/token_loader.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/error.h"
#include "test_dir.h"

namespace sinklm {
namespace {

using testing::TestDir;

constexpr uint32_t kVocab = 1 << 20;  // uint32 tokens, so every token can be its own position

// Shards whose tokens count up (0, 1, 2, ...) across shards: a sample's first text token identifies it.
std::vector<TokenShard> counting_shards(const TestDir& dir, const std::vector<std::vector<size_t>>& doc_sizes) {
  std::vector<TokenShard> shards;
  uint32_t next = 0;
  for (size_t s = 0; s < doc_sizes.size(); ++s) {
    std::vector<TokenIds> docs;
    for (size_t size : doc_sizes[s]) {
      TokenIds doc;
      for (size_t i = 0; i < size; ++i) doc.push_back(next++);
      ++next;  // the end-of-text token written after the document
      docs.push_back(doc);
    }
    std::vector<const TokenIds*> pointers;
    for (const auto& d : docs) pointers.push_back(&d);
    std::string path = dir / ("shard" + std::to_string(s) + ".bin");
    write_token_shard(path, pointers, kVocab, kVocab - 1);
    shards.emplace_back(path);
  }
  return shards;
}

LoaderOptions options(int64_t seq_len, int64_t batch, int rank, int world, uint64_t seed = 7) {
  LoaderOptions o;
  o.seq_len = seq_len;
  o.global_batch = batch;
  o.rank = rank;
  o.world_size = world;
  o.seed = seed;
  return o;
}

TEST(TokenLoader, RanksReadDisjointSharesThatCoverEveryGlobalBatchAndTheEpoch) {
  TestDir dir;
  const int world = 4;
  const int64_t batch = 8, seq_len = 16;
  std::vector<TokenLoader> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(counting_shards(dir, {{100, 50}, {300}, {7, 90}}), options(seq_len, batch, r, world));
  const uint64_t n = ranks[0].samples_per_epoch();
  // Windows of 16 tokens per shard: shard 0 has 152 tokens (9 windows), shard 1 301 (18), shard 2 99 (6).
  ASSERT_EQ(n, 9u + 18u + 6u);
  std::map<uint32_t, int> seen;  // first token of a sample -> times read in the first epoch
  const uint64_t steps = (2 * n) / batch;
  for (uint64_t step = 0; step < steps; ++step) {
    std::set<uint32_t> in_this_batch;
    for (int r = 0; r < world; ++r) {
      std::vector<uint32_t> local = ranks[r].next_batch();
      ASSERT_EQ(local.size(), size_t(batch / world * seq_len));
      for (int64_t row = 0; row < batch / world; ++row) {
        const uint32_t* sample = &local[row * seq_len];
        uint32_t first = sample[0] != kVocab - 1 ? sample[0] : sample[1] - 1;  // separators are kVocab - 1
        for (int64_t i = 1; i < seq_len; ++i)
          ASSERT_TRUE(sample[i] == first + i || sample[i] == kVocab - 1) << "window not contiguous";
        const uint64_t position = step * batch + r * (batch / world) + row;
        if (position / n == 0) ++seen[first];
        // Within one global batch no two ranks read the same sample, unless the batch spans an epoch edge.
        if (position / n == (step * batch) / n && ((step + 1) * batch - 1) / n == (step * batch) / n)
          EXPECT_TRUE(in_this_batch.insert(first).second) << "sample read twice in step " << step;
      }
    }
  }
  EXPECT_EQ(seen.size(), n) << "every sample is read in the first epoch";
  for (const auto& [first, count] : seen) EXPECT_EQ(count, 1) << "sample starting at token " << first;
}

TEST(TokenLoader, ResumeFromCursorGivesTheSamplesThatWouldHaveCome) {
  TestDir dir;
  auto shards = [&] { return counting_shards(dir, {{500}, {333, 20}}); };
  for (uint64_t stop_after : {0u, 3u, 17u, 40u}) {  // 40 steps of 4 cross epoch boundaries (48 samples/epoch)
    TokenLoader straight(shards(), options(12, 4, 1, 2));
    TokenLoader first_run(shards(), options(12, 4, 1, 2));
    for (uint64_t i = 0; i < stop_after; ++i) {
      EXPECT_EQ(first_run.next_batch(), straight.next_batch());
    }
    const std::string saved = first_run.cursor().to_json();
    TokenLoader resumed(shards(), options(12, 4, 1, 2));
    resumed.restore(LoaderCursor::from_json(saved, "test cursor"));
    for (int i = 0; i < 30; ++i) ASSERT_EQ(resumed.next_batch(), straight.next_batch()) << "after " << stop_after;
  }
}

TEST(TokenLoader, RestoringACursorOfOtherDataOrSettingsFails) {
  TestDir dir;
  TokenLoader a(counting_shards(dir, {{500}}), options(12, 4, 0, 1, 1));
  TokenLoader other_seed(counting_shards(dir, {{500}}), options(12, 4, 0, 1, 2));
  TokenLoader other_len(counting_shards(dir, {{500}}), options(10, 4, 0, 1, 1));
  EXPECT_THROW(other_seed.restore(a.cursor()), UserError);
  EXPECT_THROW(other_len.restore(a.cursor()), UserError);
  EXPECT_THROW(LoaderCursor::from_json("{\"position\": 1}", "cursor.json"), UserError);
}

TEST(TokenLoader, SinkIdsOccupyTheFirstPositionsAndTheSampleKeepsSeqLen) {
  TestDir dir;
  LoaderOptions o = options(10, 2, 0, 1);
  o.sink_ids = {kVocab, kVocab + 1, kVocab + 2};
  TokenLoader loader(counting_shards(dir, {{200}}), o);
  EXPECT_EQ(loader.samples_per_epoch(), 201u / 7u);
  std::vector<uint32_t> batch = loader.next_batch();
  ASSERT_EQ(batch.size(), 20u);
  for (int row = 0; row < 2; ++row) {
    EXPECT_EQ(batch[row * 10 + 0], kVocab);
    EXPECT_EQ(batch[row * 10 + 1], kVocab + 1);
    EXPECT_EQ(batch[row * 10 + 2], kVocab + 2);
    uint32_t first = batch[row * 10 + 3];
    EXPECT_EQ(first % 7, 0u) << "text windows are seq_len - sinks = 7 tokens long";
    for (int i = 4; i < 10; ++i) EXPECT_EQ(batch[row * 10 + i], first + (i - 3));
  }
  LoaderOptions colliding = options(10, 2, 0, 1);
  colliding.sink_ids = {5};
  EXPECT_THROW(TokenLoader(counting_shards(dir, {{200}}), colliding), UserError);
}

TEST(TokenLoader, OrderIsSeededPerEpochAndValidationOrderIsFixed) {
  TestDir dir;
  auto first_tokens = [&](LoaderOptions o, int batches) {
    TokenLoader loader(counting_shards(dir, {{1000}}), o);
    std::vector<uint32_t> firsts;
    for (int b = 0; b < batches; ++b) {
      auto batch = loader.next_batch();
      for (size_t i = 0; i < batch.size(); i += o.seq_len) firsts.push_back(batch[i]);
    }
    return firsts;
  };
  LoaderOptions a = options(10, 10, 0, 1, 3);
  EXPECT_EQ(first_tokens(a, 20), first_tokens(a, 20));
  LoaderOptions b = a;
  b.seed = 4;
  EXPECT_NE(first_tokens(a, 10), first_tokens(b, 10));
  std::vector<uint32_t> two_epochs = first_tokens(a, 20);  // 100 samples per epoch
  std::vector<uint32_t> e0(two_epochs.begin(), two_epochs.begin() + 100), e1(two_epochs.begin() + 100, two_epochs.end());
  EXPECT_NE(e0, e1) << "each epoch has its own order";
  EXPECT_EQ(std::set<uint32_t>(e0.begin(), e0.end()), std::set<uint32_t>(e1.begin(), e1.end()));
  LoaderOptions validation = a;
  validation.shuffle = false;
  std::vector<uint32_t> fixed = first_tokens(validation, 3);
  for (size_t i = 0; i < fixed.size(); ++i) EXPECT_EQ(fixed[i], i * 10);
}

TEST(TokenLoader, RejectsBatchesThatDoNotSplitOverRanks) {
  TestDir dir;
  EXPECT_THROW(TokenLoader(counting_shards(dir, {{100}}), options(10, 6, 0, 4)), UserError);
  EXPECT_THROW(TokenLoader(counting_shards(dir, {{100}}), options(10, 8, 4, 4)), UserError);
  EXPECT_THROW(TokenLoader(counting_shards(dir, {{5}}), options(10, 8, 0, 4)), UserError);
}

}  // namespace
}  // namespace sinklm
