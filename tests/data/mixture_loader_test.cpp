// Weighted mixtures of shard directories (data/shards/mixture_loader.h) against TokenLoader, the binomial
// law of the draws, ranks, and resume.
#include "data/shards/mixture_loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "data/shards/shard_directory.h"
#include "test_dir.h"
#include "../support/user_error_of.h"

namespace sinklm {
namespace {

using testing::TestDir;

constexpr uint32_t kVocab = 1 << 20;

// A shard directory whose train split counts up from `first` (so a sample's first token names its source
// and place): one shard, one document of `tokens` tokens, and the manifest that lists it.
std::string counting_directory(const TestDir& dir, const std::string& name, uint32_t first, size_t tokens) {
  const std::string path = dir / name;
  std::filesystem::create_directories(path);
  TokenIds doc;
  for (size_t i = 0; i < tokens; ++i) doc.push_back(first + static_cast<uint32_t>(i));
  const std::vector<const TokenIds*> docs = {&doc};
  write_token_shard(path + "/" + shard_file_name(Split::Train, 0, 0), docs, kVocab, kVocab - 1);
  std::ofstream(shard_manifest_path(path))
      << R"({"format": "sinklm-shards", "splits": {"train": {"shards": [")" << shard_file_name(Split::Train, 0, 0)
      << R"("]}}})";
  return path;
}

LoaderOptions options(int64_t batch, int rank = 0, int world = 1) {
  LoaderOptions o;
  o.seq_len = 8;
  o.global_batch = batch;
  o.rank = rank;
  o.world_size = world;
  o.seed = 11;
  return o;
}

std::string error_of(const std::function<void()>& body) { return testing_support::user_error_of(body); }

TEST(MixtureLoader, ParsesDirectoriesAndWeightsAndRefusesBadEntries) {
  auto sources = parse_mixture(" runs/web=0.8, other/code = 0.2", "cfg.yaml");
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[0].shards, "runs/web");
  EXPECT_DOUBLE_EQ(sources[1].weight, 0.2);
  EXPECT_EQ(sources[1].name, "code");
  EXPECT_EQ(parse_mixture("a/web=1, b/web/=1", "x")[1].name, "b/web/");  // same last name: the paths
  EXPECT_NE(error_of([] { parse_mixture("a=0.8, b=0", "cfg.yaml"); }).find("the weight of b is '0'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_mixture("a=1, b", "cfg.yaml"); }).find("'b' is not DIR=WEIGHT"), std::string::npos);
  EXPECT_NE(error_of([] { parse_mixture("a=1,a=2", "cfg.yaml"); }).find("lists a twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_mixture("a=1,", "cfg.yaml"); }).find("cfg.yaml"), std::string::npos);
}

TEST(MixtureLoader, OneSourceIsTheTokenLoaderStream) {
  TestDir dir;
  const std::string a = counting_directory(dir, "a", 0, 5000);
  MixtureLoader mixture({{a, 1.0, "a"}}, Split::Train, options(6));
  TokenLoader plain = TokenLoader::open(a, Split::Train, options(6));
  for (int b = 0; b < 300; ++b) ASSERT_EQ(mixture.next_batch(), plain.next_batch()) << "batch " << b;
  EXPECT_EQ(mixture.cursor().dump(), plain.cursor().to_json());
}

TEST(MixtureLoader, DrawsFollowTheWeightsWithinABinomialBound) {
  TestDir dir;
  const uint32_t b_first = 500000;
  const std::string a = counting_directory(dir, "a", 0, 20000), b = counting_directory(dir, "b", b_first, 20000);
  MixtureLoader mixture({{a, 0.8, "a"}, {b, 0.2, "b"}}, Split::Train, options(50));
  int64_t from_b = 0, n = 0;
  for (int step = 0; step < 100; ++step) {
    const std::vector<uint32_t> batch = mixture.next_batch();
    for (size_t row = 0; row < batch.size(); row += 8, ++n) from_b += batch[row] >= b_first;
  }
  // 5000 draws with p = 0.2: mean 1000, sd 28.3; 99.9% two-sided is 3.29 sd.
  const double sd = std::sqrt(n * 0.2 * 0.8);
  EXPECT_LT(std::abs(static_cast<double>(from_b) - 0.2 * n), 3.29 * sd) << from_b << " of " << n;
  EXPECT_EQ(mixture.tokens_drawn(), (std::vector<uint64_t>{static_cast<uint64_t>(n - from_b) * 8,
                                                            static_cast<uint64_t>(from_b) * 8}));
}

TEST(MixtureLoader, RanksSplitTheOneProcessBatchAndAResumeContinuesIt) {
  TestDir dir;
  const std::vector<MixtureSource> sources = {{counting_directory(dir, "a", 0, 3000), 0.7, "a"},
                                              {counting_directory(dir, "b", 500000, 900), 0.3, "b"}};
  MixtureLoader one(sources, Split::Train, options(8));
  MixtureLoader rank0(sources, Split::Train, options(8, 0, 2)), rank1(sources, Split::Train, options(8, 1, 2));
  for (int step = 0; step < 200; ++step) {  // past an epoch of b (112 samples): its reshuffle included
    std::vector<uint32_t> both = rank0.next_batch();
    const std::vector<uint32_t> second = rank1.next_batch();
    both.insert(both.end(), second.begin(), second.end());
    ASSERT_EQ(both, one.next_batch()) << "step " << step;
  }
  MixtureLoader resumed(sources, Split::Train, options(8));
  resumed.restore(one.cursor(), "state.json");
  for (int step = 0; step < 50; ++step) ASSERT_EQ(resumed.next_batch(), one.next_batch()) << "step " << step;

  MixtureLoader other({sources[0], {sources[1].shards, 0.5, "b"}}, Split::Train, options(8));
  EXPECT_NE(error_of([&] { other.restore(one.cursor(), "state.json"); }).find("not this run's data.mixture"),
            std::string::npos);
  MixtureLoader single({sources[0]}, Split::Train, options(8));
  EXPECT_NE(error_of([&] { single.restore(one.cursor(), "state.json"); }).find("a mixture (data.mixture)"),
            std::string::npos);
}

}  // namespace
}  // namespace sinklm
