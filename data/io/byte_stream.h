// Sequential reads of one input file's bytes, decompressing as it goes: plain files (optionally from a byte
// offset), gzip (.gz, zlib) and Zstandard (.zst, libzstd, multi-frame files included). Memory is one
// buffer, whatever the file size. disk_offset() tells how far into the file on disk the reader has got
// (compressed bytes for .gz/.zst), which is what progress and ETA are measured in.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace sinklm {

enum class Compression { None, Gzip, Zstd };

// By file name: ".gz" -> Gzip, ".zst" -> Zstd, anything else -> None.
Compression compression_of(const std::string& path);

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Up to `size` decompressed bytes into `out`; 0 at the end of the file. UserError naming the file when it
  // cannot be read or the compressed data is corrupt or truncated.
  virtual size_t read(char* out, size_t size) = 0;
  // Bytes of the file on disk consumed so far (from offset 0 of the file).
  virtual uint64_t disk_offset() const = 0;
};

// A reader positioned at decompressed byte `start` (only 0 for compressed files).
std::unique_ptr<ByteStream> open_byte_stream(const std::string& path, uint64_t start = 0);

// The whole decompressed contents of a gzip (or dictzip, which is gzip-compatible) file, whatever its name;
// a file that is not gzip is returned as it is (zlib's transparent mode). UserError naming the path when it
// cannot be read or is corrupt.
std::string read_gzip_file(const std::string& path);

}  // namespace sinklm
