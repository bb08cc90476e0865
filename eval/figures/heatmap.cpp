#include "eval/figures/heatmap.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace sinklm {

void viridis(double t, uint8_t rgb[3]) {
  static const uint8_t kAnchors[9][3] = {{68, 1, 84},    {72, 40, 120},  {62, 74, 137},  {49, 104, 142}, {38, 130, 142},
                                         {31, 158, 137}, {53, 183, 121}, {109, 205, 89}, {253, 231, 37}};
  t = std::isnan(t) ? 0 : std::clamp(t, 0.0, 1.0);
  const double x = t * 8;
  const int i = std::min(7, static_cast<int>(x));
  const double f = x - i;
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<uint8_t>(std::lround(kAnchors[i][c] * (1 - f) + kAnchors[i + 1][c] * f));
}

RgbImage render_heatmap(const std::vector<float>& values, int rows, int cols, double low, double high, int cell) {
  SINKLM_ASSERT(rows > 0 && cols > 0 && values.size() == size_t(rows) * cols && cell > 0);
  const int gap = cell, bar = std::max(8, cell);
  RgbImage image(cols * cell + gap + bar, rows * cell);
  const double span = high > low ? high - low : 1;
  const uint8_t masked[3] = {225, 225, 225};
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float v = values[size_t(r) * cols + c];
      uint8_t rgb[3];
      viridis((v - low) / span, rgb);
      for (int y = 0; y < cell; ++y)
        for (int x = 0; x < cell; ++x) image.set(c * cell + x, r * cell + y, std::isnan(v) ? masked : rgb);
    }
  for (int y = 0; y < image.height; ++y) {  // colour bar: high at the top
    uint8_t rgb[3];
    viridis(1.0 - double(y) / std::max(1, image.height - 1), rgb);
    for (int x = 0; x < bar; ++x) image.set(cols * cell + gap + x, y, rgb);
  }
  return image;
}

}  // namespace sinklm
