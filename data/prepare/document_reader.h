// Streams the raw records of one piece of an input file (input_files.h): JSONL lines, text blocks or a whole
// text file, each with the line it starts on. Only a read buffer and the current record are in memory.
//
// Byte ranges: a piece [begin, end) of an uncompressed JSONL or text-block file owns the lines (blocks) that
// start inside it; a line (block) that starts before `end` is read to its end even past `end`, and a piece
// starting mid-line (mid-block) skips to the next line (block) start. The pieces of one file therefore hold
// each record exactly once, and line numbers count the lines that start in the piece, from its first
// (prepare_plan.h turns them into file line numbers).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/io/byte_stream.h"
#include "data/prepare/input_files.h"

namespace sinklm {

struct RawRecord {
  std::string text;   // the line (without its newline and a trailing '\r'), the block or the whole file
  uint64_t line = 0;  // 1-based line of its first byte, counted from the piece's first line
};

class DocumentReader {
 public:
  DocumentReader(const InputFile& file, uint64_t begin, uint64_t end);

  // The next record; false at the end of the piece. Blank lines between JSONL documents or text blocks are
  // not records.
  bool next(RawRecord& out);
  // Lines that start in the piece, read so far (all of them once next() has returned false).
  uint64_t lines() const { return lines_; }
  // Decompressed bytes of the lines counted in lines() (so the pieces of a file add up to its size), and the
  // position in the file on disk.
  uint64_t bytes_read() const { return consumed_; }
  // Decompressed bytes read ahead into the buffer but not handed out yet.
  uint64_t bytes_buffered() const { return buffer_.size() - pos_; }
  uint64_t disk_offset() const { return stream_->disk_offset(); }

 private:
  // The next line into `line` (newline and trailing '\r' removed); false at the end of the file. `past_end`:
  // the line starts at or after the piece's end (only lines that start inside count in lines()).
  bool next_line(std::string& line, bool& past_end);
  bool fill();

  const InputFile& file_;
  uint64_t begin_, end_;
  std::unique_ptr<ByteStream> stream_;
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false, done_ = false;
  bool continuing_block_ = false;  // text blocks: skipping the end of a block owned by the previous piece
  uint64_t position_;       // decompressed offset of buffer_[pos_]
  uint64_t consumed_ = 0;   // decompressed bytes handed out as lines
  uint64_t lines_ = 0;
};

bool is_blank_line(const std::string& line);

}  // namespace sinklm
