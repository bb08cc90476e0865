#include "data/prepare/document_reader.h"

#include <cstring>

#include "core/error.h"

namespace sinklm {
namespace {

constexpr size_t kReadBytes = 1 << 20;

// Whether the line that ends just before `line_start` (a line start > 0) is blank: its bytes, read backwards
// from its newline, are whitespace up to the previous newline or the file's start.
bool line_before_is_blank(const std::string& path, uint64_t line_start) {
  auto stream_at = [&](uint64_t offset) { return open_byte_stream(path, offset); };
  char chunk[4096];
  uint64_t end = line_start - 1;  // the newline ending that line
  while (end > 0) {
    const uint64_t begin = end > sizeof(chunk) ? end - sizeof(chunk) : 0;
    const size_t n = stream_at(begin)->read(chunk, static_cast<size_t>(end - begin));
    SINKLM_ASSERT(n == end - begin, path, ": short read at byte ", begin);
    for (size_t i = n; i-- > 0;) {
      if (chunk[i] == '\n') return true;
      if (!std::strchr(" \t\r\f\v", chunk[i])) return false;
    }
    end = begin;
  }
  return true;
}

}  // namespace

bool is_blank_line(const std::string& line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string::npos;
}

DocumentReader::DocumentReader(const InputFile& file, uint64_t begin, uint64_t end)
    : file_(file), begin_(begin), end_(end), position_(begin == 0 ? 0 : begin - 1) {
  SINKLM_ASSERT(begin == 0 || file.splittable(), file.path, ": only uncompressed JSONL and text blocks are read from an offset");
  stream_ = open_byte_stream(file.path, position_);
  if (begin > 0) {
    // Skip the end of the line that starts before `begin` (it belongs to the previous piece): everything up to
    // and including the first newline at or after byte begin - 1.
    for (;;) {
      if (pos_ == buffer_.size() && !fill()) {
        done_ = true;
        return;
      }
      const char* newline = static_cast<const char*>(std::memchr(buffer_.data() + pos_, '\n', buffer_.size() - pos_));
      if (newline) {
        size_t skip = static_cast<size_t>(newline - (buffer_.data() + pos_)) + 1;
        pos_ += skip;
        position_ += skip;
        break;
      }
      position_ += buffer_.size() - pos_;
      pos_ = buffer_.size();
    }
    // A text block continues across a line start when the line before it is not blank.
    if (file.kind == InputKind::TextBlocks) continuing_block_ = !line_before_is_blank(file.path, position_);
  }
}

bool DocumentReader::fill() {
  if (eof_) return false;
  buffer_.erase(0, pos_);
  pos_ = 0;
  const size_t old = buffer_.size();
  buffer_.resize(old + kReadBytes);
  const size_t n = stream_->read(&buffer_[old], kReadBytes);
  buffer_.resize(old + n);
  if (n == 0) eof_ = true;
  return n > 0;
}

bool DocumentReader::next_line(std::string& line, bool& past_end) {
  if (done_) return false;
  past_end = file_.splittable() && position_ >= end_;
  size_t scanned = pos_;
  for (;;) {
    const char* start = buffer_.data() + scanned;
    const char* newline = static_cast<const char*>(std::memchr(start, '\n', buffer_.size() - scanned));
    if (newline || eof_) {
      const size_t stop = newline ? static_cast<size_t>(newline - buffer_.data()) : buffer_.size();
      if (!newline && stop == pos_) {
        done_ = true;
        return false;
      }
      const size_t taken = stop + (newline ? 1 : 0) - pos_;
      line.assign(buffer_, pos_, stop - pos_);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      pos_ += taken;
      position_ += taken;
      if (!past_end) {  // a line is counted (and its bytes) by the piece it starts in
        ++lines_;
        consumed_ += taken;
      }
      return true;
    }
    scanned = buffer_.size();
    const size_t keep = pos_;
    fill();
    scanned -= keep;  // fill() moved the unread bytes to the front of the buffer
  }
}

bool DocumentReader::next(RawRecord& out) {
  switch (file_.kind) {
    case InputKind::Jsonl: {
      bool past_end = false;
      while (next_line(out.text, past_end)) {
        if (past_end) break;
        out.line = lines_;
        if (!is_blank_line(out.text)) return true;
      }
      done_ = true;
      return false;
    }
    case InputKind::TextFile: {
      if (done_) return false;
      out.text.clear();
      out.line = 1;
      while (pos_ < buffer_.size() || fill()) {
        out.text.append(buffer_, pos_, std::string::npos);
        consumed_ += buffer_.size() - pos_;
        pos_ = buffer_.size();
      }
      done_ = true;
      return true;
    }
    case InputKind::TextBlocks: {
      // A block belongs to the piece its first line starts in; it is read to its end even past `end`.
      std::string line;
      bool past_end = false;
      out.text.clear();
      while (next_line(line, past_end)) {
        if (is_blank_line(line)) {
          continuing_block_ = false;
          if (!out.text.empty()) return true;
          if (past_end) break;
          continue;
        }
        if (continuing_block_) continue;  // the rest of a block that started in the previous piece
        if (out.text.empty()) {
          if (past_end) break;
          out.line = lines_;
        } else {
          out.text.push_back('\n');
        }
        out.text += line;
      }
      done_ = true;
      return !out.text.empty();
    }
  }
  SINKLM_ASSERT(false, "unknown input kind");
}

}  // namespace sinklm
