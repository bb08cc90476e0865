// An RGB image and its PNG encoding (8-bit truecolour, no interlace, filter 0 on every row, zlib deflate),
// written without Python or an image library.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // row-major, 3 bytes (R, G, B) per pixel

  RgbImage(int w, int h, uint8_t fill = 255) : width(w), height(h), pixels(size_t(w) * h * 3, fill) {}
  void set(int x, int y, const uint8_t rgb[3]);
};

// The bytes of a PNG file.
std::string encode_png(const RgbImage& image);
// encode_png, written durably to `path`.
void write_png(const std::string& path, const RgbImage& image);

}  // namespace sinklm
