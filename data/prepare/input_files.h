// The inputs of `sinklm prepare shards`: files, directories (walked recursively) and glob patterns of
//   *.jsonl, *.jsonl.gz, *.jsonl.zst   one document per line: a JSON object whose text field (--text-field,
//                                       default "text") is a string; other fields are ignored
//   *.txt, *.txt.gz, *.txt.zst          one document per file, or per blank-line-separated block
// and corpus directories written by `sinklm prepare corpus` (corpus_files.h), whose train/validation/test
// files keep their split and their document ids.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/io/byte_stream.h"
#include "data/corpus/corpus_split.h"

namespace sinklm {

enum class InputKind {
  Jsonl,       // one JSON document per line
  TextFile,    // the whole file is one document
  TextBlocks,  // documents are separated by blank (empty or whitespace-only) lines
};

struct InputFile {
  std::string path;
  uint64_t disk_bytes = 0;
  int64_t mtime_ns = 0;
  InputKind kind = InputKind::Jsonl;
  Compression compression = Compression::None;
  std::optional<Split> split;  // fixed by a corpus directory; otherwise chosen by hash (hash_split.h)
  bool has_ids = false;        // corpus directory files: each line has a unique "id"

  // Uncompressed JSONL and text blocks can be cut into byte ranges (document_reader.h); the rest is read whole.
  bool splittable() const { return kind != InputKind::TextFile && compression == Compression::None; }
};

struct InputOptions {
  bool text_blocks = false;  // .txt: a document per blank-line-separated block instead of per file
};

// Every input file, sorted by path with duplicates removed (so the order of --in arguments does not matter).
// UserError naming the argument when it does not exist, a pattern matches nothing, a file has an unknown
// extension or nothing readable is found.
std::vector<InputFile> expand_inputs(const std::vector<std::string>& specs, const InputOptions& options);

const char* input_kind_name(InputKind kind);

}  // namespace sinklm
