// The files a tokenizer consists of, as they travel with the data and the model: `sinklm prepare shards`
// copies them into the shard directory (manifest "tokenizer_files", "tokenizer_sha256"), training copies
// them into every checkpoint, and inference finds them there (data/tokenizers/text_codec.h).
#pragma once
#include <string>
#include <vector>

namespace sinklm {

// The files of the tokenizer at `path`: the file itself, vocab.json with its merges.txt, or for a directory
// the tokenizer file found in it (tokenizer.json, vocab.json, tokenizer.model). UserError naming `what` (the
// flag or key that gave `path`) when a file is missing.
std::vector<std::string> tokenizer_files(const std::string& path, const std::string& what);

// A tokenizer's identity: the sha256 of its one file, or of its files' sha256s in order (vocab.json + merges.txt).
std::string tokenizer_sha256(const std::vector<std::string>& files);

// Copies `files` into directory `dir` under their file names, durably (fsync). Returns the copies' paths.
std::vector<std::string> copy_tokenizer_files(const std::vector<std::string>& files, const std::string& dir);

}  // namespace sinklm
