#include "data/shards/shard_directory.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/io/read_file.h"
#include "data/tokenizers/tokenizer_files.h"

namespace sinklm {

std::string shard_file_name(Split split, size_t unit, size_t index) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s-%06zu-%04zu.bin", split_name(split), unit, index);
  return name;
}

std::string shard_manifest_path(const std::string& dir) { return dir + "/manifest.json"; }

namespace {

nlohmann::json read_manifest(const std::string& manifest_path) {
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_file(manifest_path));
  } catch (const nlohmann::json::exception& e) {
    fail(manifest_path, ": not valid JSON: ", e.what());
  }
  if (!manifest.is_object() || manifest.value("format", "") != "sinklm-shards")
    fail(manifest_path, ": not a token shard manifest (format is not \"sinklm-shards\"); run `sinklm prepare shards`");
  return manifest;
}

}  // namespace

ShardTokenizer read_shard_tokenizer(const std::string& dir) {
  const std::string manifest_path = shard_manifest_path(dir);
  const nlohmann::json manifest = read_manifest(manifest_path);
  ShardTokenizer t;
  try {
    t.description = manifest.value("tokenizer", "");
    for (const auto& name : manifest.value("tokenizer_files", nlohmann::json::array()))
      t.files.push_back(dir + "/" + name.get<std::string>());
    if (!t.files.empty()) t.sha256 = manifest.at("tokenizer_sha256").get<std::string>();
    t.vocab_size = manifest.value("vocab_size", int64_t{-1});
    t.end_of_text_id = manifest.value("end_of_text_id", int64_t{-1});
  } catch (const nlohmann::json::exception& e) {
    fail(manifest_path, ": tokenizer_files/tokenizer_sha256/vocab_size/end_of_text_id: ", e.what());
  }
  for (const auto& file : t.files)
    if (!std::filesystem::exists(file)) fail(manifest_path, ": lists tokenizer file ", file, ", which is missing");
  if (!t.files.empty() && tokenizer_sha256(t.files) != t.sha256)
    fail(dir, "/tokenizer: its files' sha256 is not the manifest's tokenizer_sha256 (changed after `prepare shards`?)");
  return t;
}

std::vector<TokenShard> open_split_shards(const std::string& dir, Split split) {
  const std::string manifest_path = shard_manifest_path(dir);
  const nlohmann::json manifest = read_manifest(manifest_path);
  const nlohmann::json names = manifest["splits"][split_name(split)].value("shards", nlohmann::json::array());
  if (names.empty()) fail(manifest_path, ": no shards for split '", split_name(split), "'");
  std::vector<TokenShard> shards;
  for (const auto& name : names) shards.emplace_back(dir + "/" + name.get<std::string>());
  for (const TokenShard& s : shards)
    if (s.vocab_size() != shards.front().vocab_size() || s.end_of_text_id() != shards.front().end_of_text_id())
      fail(s.path(), ": vocabulary differs from ", shards.front().path(), " (mixed tokenizers?)");
  return shards;
}

std::vector<uint32_t> concatenated_tokens(const std::vector<TokenShard>& shards, int64_t max_tokens) {
  std::vector<uint32_t> tokens;
  for (const TokenShard& shard : shards) {
    const uint64_t left = max_tokens < 0 ? shard.token_count() : static_cast<uint64_t>(max_tokens) - tokens.size();
    shard.copy_tokens(0, std::min<uint64_t>(left, shard.token_count()), tokens);
    if (max_tokens >= 0 && tokens.size() >= static_cast<uint64_t>(max_tokens)) break;
  }
  return tokens;
}

}  // namespace sinklm
