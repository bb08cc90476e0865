#include "eval/figures/png_image.h"

#include <zlib.h>

#include <algorithm>

#include "core/files/atomic_dir.h"
#include "core/error.h"

namespace sinklm {
namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

// A chunk: length, type, data, CRC-32 of type + data.
void put_chunk(std::string& out, const char type[4], const std::string& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  std::string body = std::string(type, 4) + data;
  out += body;
  put_u32(out, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(body.data()), body.size())));
}

}  // namespace

void RgbImage::set(int x, int y, const uint8_t rgb[3]) {
  SINKLM_ASSERT(x >= 0 && x < width && y >= 0 && y < height);
  std::copy(rgb, rgb + 3, pixels.begin() + (size_t(y) * width + x) * 3);
}

std::string encode_png(const RgbImage& image) {
  SINKLM_ASSERT(image.width > 0 && image.height > 0);
  std::string header;
  put_u32(header, image.width);
  put_u32(header, image.height);
  header += std::string("\x08\x02\x00\x00\x00", 5);  // bit depth 8, truecolour, deflate, filter 0, no interlace

  std::string raw;  // each scanline: filter type 0, then the row's bytes
  const size_t row_bytes = size_t(image.width) * 3;
  for (int y = 0; y < image.height; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(image.pixels.data()) + y * row_bytes, row_bytes);
  }
  uLongf compressed_size = compressBound(raw.size());
  std::string compressed(compressed_size, '\0');
  int rc = compress2(reinterpret_cast<Bytef*>(compressed.data()), &compressed_size,
                     reinterpret_cast<const Bytef*>(raw.data()), raw.size(), Z_BEST_COMPRESSION);
  SINKLM_ASSERT(rc == Z_OK, "zlib compress2 failed: ", rc);
  compressed.resize(compressed_size);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", compressed);
  put_chunk(png, "IEND", "");
  return png;
}

void write_png(const std::string& path, const RgbImage& image) { write_file_durable(path, encode_png(image)); }

}  // namespace sinklm
