// The tokenizer that travels with shards and checkpoints (data/tokenizers/tokenizer_files.h) and its copy in a
// shard directory (data/shards/shard_directory.h: read_shard_tokenizer), checked against sha256 computed here
// independently of the code under test (core/files/sha256.h on the bytes, not on the files).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files/sha256.h"
#include "data/shards/shard_directory.h"
#include "data/tokenizers/tokenizer_files.h"
#include "test_dir.h"
#include "../support/user_error_of.h"

namespace sinklm {
namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string hex_of(const std::string& bytes) { return sha256_bytes(bytes.data(), bytes.size()); }

std::string error_of(const std::function<void()>& body) { return testing_support::user_error_of(body); }

TEST(TokenizerFiles, AFileADirectoryAndVocabJsonWithItsMerges) {
  testing::TestDir dir;
  write(dir / "tokenizer.json", "{}");
  EXPECT_EQ(tokenizer_files(dir / "tokenizer.json", "--tokenizer"), std::vector<std::string>{dir / "tokenizer.json"});
  EXPECT_EQ(tokenizer_files(dir.path(), "--tokenizer"), std::vector<std::string>{dir / "tokenizer.json"});
  testing::TestDir bpe;
  write(bpe / "vocab.json", "{\"a\": 0}");
  EXPECT_NE(error_of([&] { tokenizer_files(bpe / "vocab.json", "data.tokenizer"); }).find("data.tokenizer"), std::string::npos);
  write(bpe / "merges.txt", "#version: 0.2\n");
  EXPECT_EQ(tokenizer_files(bpe / "vocab.json", "x"), (std::vector<std::string>{bpe / "vocab.json", bpe / "merges.txt"}));
  EXPECT_NE(error_of([&] { tokenizer_files(bpe / "missing.json", "--tokenizer"); }).find("--tokenizer"), std::string::npos);
}

TEST(TokenizerFiles, Sha256IsTheFilesOrTheFilesHashesInOrder) {
  testing::TestDir dir;
  write(dir / "vocab.json", "{\"a\": 0}");
  write(dir / "merges.txt", "#version: 0.2\n");
  EXPECT_EQ(tokenizer_sha256({dir / "vocab.json"}), hex_of("{\"a\": 0}"));
  EXPECT_EQ(tokenizer_sha256({dir / "vocab.json", dir / "merges.txt"}),
            hex_of(hex_of("{\"a\": 0}") + hex_of("#version: 0.2\n")));
}

TEST(ShardTokenizer, TheCopyIsCheckedAgainstTheManifest) {
  testing::TestDir shards;
  write(shards / "manifest.json", R"j({"format": "sinklm-shards", "tokenizer": "bytes (id = byte value)"})j");
  EXPECT_TRUE(read_shard_tokenizer(shards.path()).files.empty());  // bytes, or written before the copy

  std::filesystem::create_directories(shards / "tokenizer");
  write(shards / "tokenizer/tokenizer.json", "{\"model\": 1}");
  nlohmann::json manifest = {{"format", "sinklm-shards"}, {"tokenizer", "byte-level BPE"},
                             {"tokenizer_files", {"tokenizer/tokenizer.json"}},
                             {"tokenizer_sha256", hex_of("{\"model\": 1}")}};
  write(shards / "manifest.json", manifest.dump());
  const ShardTokenizer t = read_shard_tokenizer(shards.path());
  EXPECT_EQ(t.files, std::vector<std::string>{shards / "tokenizer/tokenizer.json"});
  EXPECT_EQ(t.sha256, hex_of("{\"model\": 1}"));

  write(shards / "tokenizer/tokenizer.json", "{\"model\": 2}");  // changed after prepare
  EXPECT_NE(error_of([&] { read_shard_tokenizer(shards.path()); }).find("tokenizer_sha256"), std::string::npos);
  std::filesystem::remove(shards / "tokenizer/tokenizer.json");
  EXPECT_NE(error_of([&] { read_shard_tokenizer(shards.path()); }).find("missing"), std::string::npos);
  write(shards / "manifest.json", R"({"format": "sinklm-shards", "tokenizer_files": [7], "tokenizer_sha256": "x"})");
  EXPECT_NE(error_of([&] { read_shard_tokenizer(shards.path()); }).find("manifest.json"), std::string::npos);
}

}  // namespace
}  // namespace sinklm
