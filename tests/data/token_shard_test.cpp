#include "data/shards/token_shard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/io/read_file.h"
#include "test_dir.h"

namespace sinklm {
namespace {

using testing::TestDir;

std::string error_of(const std::string& path) {
  try {
    TokenShard shard(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

void overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(TokenShard, RoundTripsDocumentsWithEndOfTextAndIndex) {
  TestDir dir;
  for (uint32_t vocab : {1000u, 70000u}) {
    TokenIds a = {1, 2, 3}, b = {}, c = {vocab - 2, 0, 7};
    std::string path = dir / ("s" + std::to_string(vocab) + ".bin");
    write_token_shard(path, {&a, &b, &c}, vocab, vocab - 1);
    TokenShard shard(path);
    EXPECT_EQ(shard.bytes_per_token(), vocab <= 65536 ? 2u : 4u);
    EXPECT_EQ(shard.document_count(), 3u);
    ASSERT_EQ(shard.token_count(), 3u + 1 + 1 + 3 + 1);
    std::vector<uint32_t> all;
    shard.copy_tokens(0, shard.token_count(), all);
    EXPECT_EQ(all, (std::vector<uint32_t>{1, 2, 3, vocab - 1, vocab - 1, vocab - 2, 0, 7, vocab - 1}));
    EXPECT_EQ(shard.document_start(0), 0u);
    EXPECT_EQ(shard.document_start(1), 4u);
    EXPECT_EQ(shard.document_start(2), 5u);
    EXPECT_EQ(shard.document_start(3), 9u);
    EXPECT_EQ(shard.token(5), vocab - 2);
  }
}

TEST(TokenShard, CorruptionIsAClearErrorNamingTheFile) {
  TestDir dir;
  TokenIds doc = {5, 6, 7, 8};
  const std::string good = dir / "good.bin";
  write_token_shard(good, {&doc}, 100, 99);
  const std::string bytes = read_file(good);

  const std::string truncated = dir / "truncated.bin";
  overwrite(truncated, bytes.substr(0, bytes.size() - 3));
  std::string why = error_of(truncated);
  EXPECT_NE(why.find(truncated), std::string::npos) << why;
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;

  const std::string header_only = dir / "header-only.bin";
  overwrite(header_only, bytes.substr(0, 20));
  why = error_of(header_only);
  EXPECT_NE(why.find(header_only), std::string::npos) << why;
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;

  const std::string magic = dir / "magic.bin";
  overwrite(magic, "NOTASHRD" + bytes.substr(8));
  why = error_of(magic);
  EXPECT_NE(why.find(magic), std::string::npos) << why;
  EXPECT_NE(why.find("magic"), std::string::npos) << why;

  const std::string grown = dir / "grown.bin";
  std::string more_tokens = bytes;
  more_tokens[16] = static_cast<char>(more_tokens[16] + 1);  // token count no longer matches the size
  overwrite(grown, more_tokens);
  why = error_of(grown);
  EXPECT_NE(why.find(grown), std::string::npos) << why;
  EXPECT_NE(why.find("bytes"), std::string::npos) << why;

  const std::string extra = dir / "extra.bin";
  overwrite(extra, bytes + "x");
  EXPECT_NE(error_of(extra).find(extra), std::string::npos);

  const std::string version = dir / "version.bin";
  std::string other_version = bytes;
  other_version[8] = 9;
  overwrite(version, other_version);
  EXPECT_NE(error_of(version).find("version 9"), std::string::npos) << error_of(version);

  EXPECT_NE(error_of(dir / "missing.bin").find("missing.bin"), std::string::npos);
  EXPECT_EQ(error_of(good), "");
}

}  // namespace
}  // namespace sinklm
