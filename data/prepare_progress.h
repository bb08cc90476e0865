// Counters of a `prepare shards` job, shared by the threads of a rank and summed over ranks by the command
// for its progress line (MB/s, tokens/s, documents, bad lines, ETA).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

struct PrepareCounters {
  std::atomic<uint64_t> disk_bytes{0};          // input read on disk (compressed bytes for .gz/.zst)
  std::atomic<uint64_t> skipped_disk_bytes{0};  // of which: units finished by an earlier, interrupted run
  std::atomic<uint64_t> input_bytes{0};         // decompressed input bytes read
  std::atomic<uint64_t> tokens{0};              // tokens written, end-of-text ids included
  std::atomic<uint64_t> documents{0};
  std::atomic<uint64_t> bad_lines{0};
  std::atomic<uint64_t> records{0};             // documents + bad lines + empty documents

  // In a fixed order, for a sum over ranks; `finished` is 1 once this rank has no work left.
  std::vector<double> snapshot(bool finished) const;
};

// Sums over ranks of PrepareCounters::snapshot().
struct ProgressTotals {
  double disk_bytes = 0, skipped_disk_bytes = 0, input_bytes = 0, tokens = 0, documents = 0, bad_lines = 0,
         records = 0, finished_ranks = 0;
  static ProgressTotals from_snapshot(const std::vector<double>& sums);
};

// "[prepare shards] 41.3% of 2.15 GB | 31.2 MB/s, 7.81M tokens/s | 120,311 documents, 3 bad lines | ETA 0:01:23"
// Rates count this run's work only (units finished before a resume are excluded).
std::string progress_line(const ProgressTotals& totals, double total_disk_bytes, double seconds);

// "1,234,567"
std::string with_thousands(uint64_t n);
// "512 kB", "3.1 MB", "2.15 GB", "1.20 TB"
std::string human_bytes(double bytes);

}  // namespace sinklm
