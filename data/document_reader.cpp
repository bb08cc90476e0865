#include "data/document_reader.h"

#include <cstring>

#include "core/error.h"

namespace sinklm {
namespace {

constexpr size_t kReadBytes = 1 << 20;

}  // namespace

bool is_blank_line(const std::string& line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string::npos;
}

DocumentReader::DocumentReader(const InputFile& file, uint64_t begin, uint64_t end)
    : file_(file), begin_(begin), end_(end), position_(begin == 0 ? 0 : begin - 1) {
  SINKLM_ASSERT(begin == 0 || file.splittable(), file.path, ": only uncompressed JSONL is read from an offset");
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

bool DocumentReader::next_line(std::string& line) {
  if (done_) return false;
  if (file_.splittable() && position_ >= end_) {
    done_ = true;
    return false;
  }
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
      consumed_ += taken;
      ++lines_;
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
    case InputKind::Jsonl:
      while (next_line(out.text)) {
        out.line = lines_;
        if (!is_blank_line(out.text)) return true;
      }
      return false;
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
      std::string line;
      out.text.clear();
      while (next_line(line)) {
        if (is_blank_line(line)) {
          if (!out.text.empty()) return true;
          continue;
        }
        if (out.text.empty()) out.line = lines_;
        else out.text.push_back('\n');
        out.text += line;
      }
      return !out.text.empty();
    }
  }
  SINKLM_ASSERT(false, "unknown input kind");
}

}  // namespace sinklm
