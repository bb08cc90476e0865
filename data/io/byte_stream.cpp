#include "data/io/byte_stream.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/ends_with.h"
#include "core/error.h"

namespace sinklm {
namespace {

class FileDescriptor {
 public:
  explicit FileDescriptor(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) fail(path, ": cannot open: ", std::strerror(errno));
  }
  ~FileDescriptor() { ::close(fd_); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  // Up to `size` bytes at `offset`; UserError naming the file on failure.
  size_t pread(char* out, size_t size, uint64_t offset, const std::string& path) const {
    for (;;) {
      ssize_t n = ::pread(fd_, out, size, static_cast<off_t>(offset));
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) fail(path, ": read failed at byte ", offset, ": ", std::strerror(errno));
    }
  }

 private:
  int fd_;
};

class PlainStream : public ByteStream {
 public:
  PlainStream(const std::string& path, uint64_t start) : path_(path), file_(path), offset_(start) {}
  size_t read(char* out, size_t size) override {
    size_t n = file_.pread(out, size, offset_, path_);
    offset_ += n;
    return n;
  }
  uint64_t disk_offset() const override { return offset_; }

 private:
  std::string path_;
  FileDescriptor file_;
  uint64_t offset_;
};

class GzipStream : public ByteStream {
 public:
  explicit GzipStream(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_) fail(path, ": cannot open: ", std::strerror(errno));
    gzbuffer(file_, 1 << 17);
  }
  ~GzipStream() override { gzclose(file_); }
  size_t read(char* out, size_t size) override {
    int n = gzread(file_, out, static_cast<unsigned>(std::min<size_t>(size, 1u << 30)));
    if (n < 0) {
      int code = 0;
      fail(path_, ": corrupt gzip data: ", gzerror(file_, &code));
    }
    if (n == 0) {
      int code = Z_OK;
      gzerror(file_, &code);
      if (code == Z_BUF_ERROR) fail(path_, ": truncated gzip data (the file ends inside the stream)");
    }
    return static_cast<size_t>(n);
  }
  uint64_t disk_offset() const override { return static_cast<uint64_t>(gzoffset(file_)); }

 private:
  std::string path_;
  gzFile file_;
};

class ZstdStream : public ByteStream {
 public:
  explicit ZstdStream(const std::string& path)
      : path_(path), file_(path), stream_(ZSTD_createDStream()), in_(ZSTD_DStreamInSize()) {
    if (!stream_) fail(path, ": out of memory for a zstd decoder");
    ZSTD_initDStream(stream_);
  }
  ~ZstdStream() override { ZSTD_freeDStream(stream_); }
  size_t read(char* out, size_t size) override {
    ZSTD_outBuffer output{out, size, 0};
    while (output.pos == 0) {
      if (input_.pos == input_.size) {
        size_t n = file_.pread(in_.data(), in_.size(), disk_offset_, path_);
        disk_offset_ += n;
        if (n == 0) {
          if (frame_open_) fail(path_, ": truncated zstd data (the file ends inside a frame)");
          return 0;
        }
        input_ = ZSTD_inBuffer{in_.data(), n, 0};
      }
      size_t rc = ZSTD_decompressStream(stream_, &output, &input_);
      if (ZSTD_isError(rc)) fail(path_, ": corrupt zstd data: ", ZSTD_getErrorName(rc));
      frame_open_ = rc != 0;
    }
    return output.pos;
  }
  uint64_t disk_offset() const override { return disk_offset_ - (input_.size - input_.pos); }

 private:
  std::string path_;
  FileDescriptor file_;
  ZSTD_DStream* stream_;
  std::vector<char> in_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  uint64_t disk_offset_ = 0;
  bool frame_open_ = false;
};

}  // namespace

Compression compression_of(const std::string& path) {
  if (ends_with(path, ".gz")) return Compression::Gzip;
  if (ends_with(path, ".zst")) return Compression::Zstd;
  return Compression::None;
}

std::unique_ptr<ByteStream> open_byte_stream(const std::string& path, uint64_t start) {
  switch (compression_of(path)) {
    case Compression::None: return std::make_unique<PlainStream>(path, start);
    case Compression::Gzip:
      SINKLM_ASSERT(start == 0, path, ": a gzip file is read from its start");
      return std::make_unique<GzipStream>(path);
    case Compression::Zstd:
      SINKLM_ASSERT(start == 0, path, ": a zstd file is read from its start");
      return std::make_unique<ZstdStream>(path);
  }
  SINKLM_ASSERT(false, "unknown compression");
}

std::string read_gzip_file(const std::string& path) {
  GzipStream stream(path);
  std::string out;
  char buffer[1 << 16];
  while (size_t n = stream.read(buffer, sizeof(buffer))) out.append(buffer, n);
  return out;
}

}  // namespace sinklm
