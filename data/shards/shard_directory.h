// A directory of token shards (written by `sinklm prepare shards`, data/prepare/prepare_job.h):
//   <dir>/<split>-<unit>-<k>.bin   token shards (format: token_shard.h), documents never cross shards
//   <dir>/tokenizer/               a copy of the tokenizer's files (data/tokenizers/tokenizer_files.h)
//   <dir>/manifest.json            {"format": "sinklm-shards", "format_version": 1, "tokenizer": description,
//                                   "tokenizer_files": ["tokenizer/<name>", ...] ([] for bytes; absent in
//                                   directories written before the copy), "tokenizer_sha256",
//                                   "vocab_size", "end_of_text_id", "bytes_per_token", "inputs": [paths], "seed",
//                                   "split_fractions": {"validation", "test"},
//                                   "splits": {"train": {"shards": [file names], "tokens", "documents"}, ...},
//                                   "documents": [{"id", "split", "shard", "tokens"}]   (corpus directory inputs)}
//   <dir>/summary.json, bad_lines.tsv   totals and the skipped records (prepare_job.h)
// Readers take the shard names from the manifest, in order.
#pragma once
#include <string>
#include <vector>

#include "data/corpus/corpus_split.h"
#include "data/shards/token_shard.h"

namespace sinklm {

// "<split>-<unit, 6 digits>-<index, 4 digits>.bin": shard `index` of work unit `unit` (prepare_plan.h).
std::string shard_file_name(Split split, size_t unit, size_t index);
std::string shard_manifest_path(const std::string& dir);

// The shards of one split, opened (memory-mapped) in manifest order. UserError naming the manifest when it
// is missing, malformed or lists no shard for the split, and naming a shard that fails its checks.
std::vector<TokenShard> open_split_shards(const std::string& dir, Split split);

// The first `max_tokens` tokens (-1: all) of `shards` (open_split_shards: manifest order) one after another,
// documents as training reads them: each followed by the end-of-text id.
std::vector<uint32_t> concatenated_tokens(const std::vector<TokenShard>& shards, int64_t max_tokens = -1);

// The tokenizer the shards were made with, as copied into the directory; `files` empty when the manifest
// names none (bytes, or a directory written before the copy). UserError when a listed copy is missing or its
// sha256 is not the manifest's.
struct ShardTokenizer {
  std::vector<std::string> files;  // paths inside `dir`
  std::string sha256;
  std::string description;
  int64_t vocab_size = -1;      // the manifest's vocab_size and end_of_text_id (-1: not recorded): what a
  int64_t end_of_text_id = -1;  // byte-level directory (no files) tells of its vocabulary
};
ShardTokenizer read_shard_tokenizer(const std::string& dir);

}  // namespace sinklm
