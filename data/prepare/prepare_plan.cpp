#include "data/prepare/prepare_plan.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.h"

namespace sinklm {

std::vector<WorkUnit> plan_work_units(const std::vector<InputFile>& files, uint64_t unit_bytes) {
  SINKLM_ASSERT(unit_bytes > 0, "unit size 0");
  std::vector<WorkUnit> units;
  WorkUnit current;
  auto close = [&] {
    if (current.pieces.empty()) return;
    current.index = units.size();
    units.push_back(std::move(current));
    current = WorkUnit{};
  };
  for (size_t f = 0; f < files.size(); ++f) {
    const uint64_t size = files[f].disk_bytes;
    if (!files[f].splittable()) {
      const uint64_t work = size * (files[f].compression == Compression::None ? 1 : kCompressedWorkFactor);
      if (work >= unit_bytes) close();
      current.pieces.push_back({f, 0, size});
      current.disk_bytes += size;
      current.work += work;
      if (current.work >= unit_bytes) close();
      continue;
    }
    uint64_t pos = 0;
    do {
      const uint64_t take = std::min(unit_bytes - current.work, size - pos);
      current.pieces.push_back({f, pos, pos + take});
      current.disk_bytes += take;
      current.work += take;
      pos += take;
      if (current.work >= unit_bytes) close();
    } while (pos < size);
  }
  close();
  return units;
}

std::vector<size_t> units_of_rank(const std::vector<WorkUnit>& units, int rank, int world) {
  SINKLM_ASSERT(world >= 1 && rank >= 0 && rank < world);
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return units[a].work > units[b].work; });
  std::vector<uint64_t> load(static_cast<size_t>(world), 0);
  std::vector<size_t> mine;
  for (size_t u : order) {
    const size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[least] += std::max<uint64_t>(units[u].work, 1);
    if (least == static_cast<size_t>(rank)) mine.push_back(u);
  }
  std::sort(mine.begin(), mine.end());
  return mine;
}

std::vector<std::vector<uint64_t>> first_lines_of_pieces(const std::vector<WorkUnit>& units,
                                                         const std::vector<std::vector<uint64_t>>& pieces_lines) {
  SINKLM_ASSERT(pieces_lines.size() == units.size());
  std::map<size_t, uint64_t> next_line;  // file -> line number of the next piece's first line
  std::vector<std::vector<uint64_t>> first(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    SINKLM_ASSERT(pieces_lines[u].size() == units[u].pieces.size());
    for (size_t p = 0; p < units[u].pieces.size(); ++p) {
      uint64_t& line = next_line.try_emplace(units[u].pieces[p].file, 1).first->second;
      first[u].push_back(line);
      line += pieces_lines[u][p];
    }
  }
  return first;
}

}  // namespace sinklm
