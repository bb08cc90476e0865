// Binary token shards: the tokens of whole documents, each followed by the end-of-text id, plus an index of
// where each document starts. All integers little-endian.
//
//   offset  size  field
//   0       8     magic "SINKTOK\0"
//   8       4     format version (1)
//   12      4     bytes per token: 2 (uint16, vocabulary <= 65536) or 4 (uint32)
//   16      8     token count T (end-of-text ids included)
//   24      8     document count D
//   32      4     vocabulary size
//   36      4     end-of-text id
//   40      24    zero
//   64      T * bytes per token    tokens
//   ...     (D + 1) * 8            uint64 token offset of each document's first token, then T
// The file size must be exactly 64 + T * bytes_per_token + (D + 1) * 8.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizers/tokenizer.h"

namespace sinklm {

constexpr uint32_t kTokenShardVersion = 1;
constexpr size_t kTokenShardHeaderBytes = 64;

// 2 when every id fits in uint16, else 4.
uint32_t token_bytes_for_vocab(uint32_t vocab_size);

// Serialises documents into one shard file, durably (a TokenShardWriter; callers put it in an AtomicDirWriter
// staging directory).
void write_token_shard(const std::string& path, const std::vector<const TokenIds*>& documents, uint32_t vocab_size,
                       uint32_t end_of_text_id);

// Streams documents into one shard file without holding it in memory: tokens go to "<path>.partial" as they
// come, the document index and the header are written by finish(), which fsyncs and renames the file to
// `path` (so a shard under its final name is always complete).
class TokenShardWriter {
 public:
  TokenShardWriter(std::string path, uint32_t vocab_size, uint32_t end_of_text_id);
  ~TokenShardWriter();  // an unfinished shard's partial file is removed
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;

  // Appends the document's ids and the end-of-text id.
  void add_document(const TokenIds& ids);
  void finish();
  uint64_t token_count() const { return starts_.back(); }
  uint64_t document_count() const { return starts_.size() - 1; }
  const std::string& path() const { return path_; }

 private:
  void flush_buffer();

  std::string path_, partial_path_;
  uint32_t vocab_size_, end_of_text_id_, width_;
  int fd_ = -1;
  std::string buffer_;
  std::vector<uint64_t> starts_{0};
};

// A memory-mapped shard, checked on open: wrong magic, unknown version, a size that disagrees with the
// header or a malformed document index is a UserError naming the file.
class TokenShard {
 public:
  explicit TokenShard(const std::string& path);
  ~TokenShard();
  TokenShard(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  TokenShard& operator=(TokenShard&&) = delete;

  const std::string& path() const { return path_; }
  uint64_t token_count() const { return token_count_; }
  uint64_t document_count() const { return document_count_; }
  uint32_t vocab_size() const { return vocab_size_; }
  uint32_t end_of_text_id() const { return end_of_text_id_; }
  uint32_t bytes_per_token() const { return bytes_per_token_; }

  uint32_t token(uint64_t i) const;
  // Append tokens [begin, begin + count) to out.
  void copy_tokens(uint64_t begin, uint64_t count, std::vector<uint32_t>& out) const;
  // Token offset of document d's first token (d <= document_count(); d == document_count() gives T).
  uint64_t document_start(uint64_t d) const;

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  uint64_t token_count_ = 0, document_count_ = 0;
  uint32_t vocab_size_ = 0, end_of_text_id_ = 0, bytes_per_token_ = 0;
};

}  // namespace sinklm
