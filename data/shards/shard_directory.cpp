#include "data/shards/shard_directory.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/io/read_file.h"

namespace sinklm {

std::string shard_file_name(Split split, size_t unit, size_t index) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s-%06zu-%04zu.bin", split_name(split), unit, index);
  return name;
}

std::string shard_manifest_path(const std::string& dir) { return dir + "/manifest.json"; }

std::vector<TokenShard> open_split_shards(const std::string& dir, Split split) {
  const std::string manifest_path = shard_manifest_path(dir);
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_file(manifest_path));
  } catch (const nlohmann::json::exception& e) {
    fail(manifest_path, ": not valid JSON: ", e.what());
  }
  if (manifest.value("format", "") != "sinklm-shards")
    fail(manifest_path, ": not a token shard manifest (format is not \"sinklm-shards\"); run `sinklm prepare shards`");
  const nlohmann::json names = manifest["splits"][split_name(split)].value("shards", nlohmann::json::array());
  if (names.empty()) fail(manifest_path, ": no shards for split '", split_name(split), "'");
  std::vector<TokenShard> shards;
  for (const auto& name : names) shards.emplace_back(dir + "/" + name.get<std::string>());
  for (const TokenShard& s : shards)
    if (s.vocab_size() != shards.front().vocab_size() || s.end_of_text_id() != shards.front().end_of_text_id())
      fail(s.path(), ": vocabulary differs from ", shards.front().path(), " (mixed tokenizers?)");
  return shards;
}

}  // namespace sinklm
