// Heatmaps of matrices (attention maps, per-head sink mass) as PNG images: one square of `cell` pixels per
// entry, coloured by the viridis colour map from `low` (dark purple) to `high` (yellow); NaN entries (the
// masked upper triangle of a causal map) are light grey. A colour bar from low (bottom) to high (top) is
// drawn at the right.
#pragma once
#include <string>
#include <vector>

#include "eval/figures/png_image.h"

namespace sinklm {

// Viridis at t in [0, 1] (clamped), interpolated from 9 anchor colours.
void viridis(double t, uint8_t rgb[3]);

// values: rows x cols, row-major.
RgbImage render_heatmap(const std::vector<float>& values, int rows, int cols, double low, double high, int cell);

}  // namespace sinklm
