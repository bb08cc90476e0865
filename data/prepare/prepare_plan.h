// How a `prepare shards` job is cut into work units, and which rank does which. Depends only on the inputs
// and --unit-bytes, never on the number of ranks or threads, so the shards (named after their unit) are the
// same whatever runs them.
//
// Files are taken in path order and packed into units of about `unit_bytes` of work: an uncompressed JSONL or
// text-block file is cut into byte ranges (document_reader.h), any other file is read whole; several small files share a
// unit, a file of at least `unit_bytes` gets a unit of its own. Work is bytes on disk, times
// kCompressedWorkFactor for .gz/.zst files (text compresses about that much), so that compressed files are not
// packed into a few huge units.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/prepare/input_files.h"

namespace sinklm {

struct InputPiece {
  size_t file = 0;       // index into the job's InputFile list
  uint64_t begin = 0;    // byte range of the file; whole files are [0, disk_bytes)
  uint64_t end = 0;
};

constexpr uint64_t kCompressedWorkFactor = 4;

struct WorkUnit {
  size_t index = 0;
  std::vector<InputPiece> pieces;
  uint64_t disk_bytes = 0;
  uint64_t work = 0;  // disk bytes, compressed files counted kCompressedWorkFactor times
};

std::vector<WorkUnit> plan_work_units(const std::vector<InputFile>& files, uint64_t unit_bytes);

// The units rank `rank` of `world` processes, in unit order: largest units first to the least loaded rank
// (deterministic), so ranks finish together even when compressed files make units uneven.
std::vector<size_t> units_of_rank(const std::vector<WorkUnit>& units, int rank, int world);

// The 1-based line number, in its file, of the first line of every piece, from the line counts of the
// pieces (pieces_lines[u][p] = lines read by piece p of unit u). Result indexed like the pieces.
std::vector<std::vector<uint64_t>> first_lines_of_pieces(const std::vector<WorkUnit>& units,
                                                         const std::vector<std::vector<uint64_t>>& pieces_lines);

}  // namespace sinklm
