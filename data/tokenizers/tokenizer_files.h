// The files a tokenizer consists of, as they travel with the data and the model: `sinklm prepare shards`
// copies them into the shard directory (manifest "tokenizer_files", "tokenizer_sha256"), training copies
// them into every checkpoint, and inference finds them there (data/tokenizers/text_codec.h).
#pragma once
#include <string>
#include <vector>

namespace sinklm {

// The tokenizer file in a directory (a checkpoint, a shard directory, a Hugging Face model), or "". The run's own
// file comes first, by the names checkpoint_tokenizer_name() gives it: sinklm.tokenizer.json, vocab.json,
// tokenizer.model, *.tiktoken; then tokenizer.json. A sinklm checkpoint's tokenizer.json is the Hugging Face view
// (export/hf_tokenizer_files.h: it adds the sink tokens), read only where a directory has nothing else.
std::string find_tokenizer_file(const std::string& dir);

// The name a tokenizer file takes in a checkpoint: its own for vocab.json, merges.txt and *.tiktoken;
// tokenizer.model for a SentencePiece model; sinklm.tokenizer.json for a tokenizer.json (whatever it was called),
// so that the checkpoint's tokenizer.json can be the one Hugging Face reads.
std::string checkpoint_tokenizer_name(const std::string& file);

// The files of the tokenizer at `path`: the file itself, vocab.json with its merges.txt, or for a directory
// the tokenizer file found in it (find_tokenizer_file). UserError naming `what` (the flag or key that gave
// `path`) when a file is missing.
std::vector<std::string> tokenizer_files(const std::string& path, const std::string& what);

// A tokenizer's identity: the sha256 of its one file, or of its files' sha256s in order (vocab.json + merges.txt).
std::string tokenizer_sha256(const std::vector<std::string>& files);

// Copies `files` into directory `dir` under their file names, durably (fsync). Returns the copies' paths.
std::vector<std::string> copy_tokenizer_files(const std::vector<std::string>& files, const std::string& dir);

}  // namespace sinklm
