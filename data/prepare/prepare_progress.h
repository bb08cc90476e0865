// Counters of a `prepare shards` job, shared by the threads of a rank and summed over ranks by the command
// for its progress line (MB/s, tokens/s, documents, bad lines, ETA).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "core/progress_meter.h"  // with_thousands, clock_time

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

// Watches a rank's work from a second thread: a few times a second it sums the counters of every rank with
// `reduce` (the command's collective: an MPI allreduce; nothing in a world of one), prints a progress line to
// `out` every `print_seconds` (rank 0; null elsewhere), and raises stop() once 10,000 records are read and
// more than `max_bad_fraction` of them are malformed. Every rank sees the same sums, so all stop together.
class ProgressMonitor {
 public:
  using Reduce = std::function<void(std::vector<double>&)>;
  ProgressMonitor(const PrepareCounters& counters, Reduce reduce, int world_size, double total_disk_bytes,
                  double max_bad_fraction, double print_seconds, std::ostream* out);
  ~ProgressMonitor();  // finish()es when the caller did not
  ProgressMonitor(const ProgressMonitor&) = delete;
  ProgressMonitor& operator=(const ProgressMonitor&) = delete;

  const std::atomic<bool>& stop() const { return stop_; }
  // Marks this rank's work done; returns, with the final sums, once every rank's is (the last line printed).
  ProgressTotals finish();
  double seconds() const;

 private:
  void rounds();

  const PrepareCounters& counters_;
  Reduce reduce_;
  int world_size_;
  double total_disk_bytes_, max_bad_fraction_, print_seconds_;
  std::ostream* out_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> stop_{false}, finished_{false};
  ProgressTotals totals_;
  std::thread thread_;
};

// "512 kB", "3.1 MB", "2.15 GB", "1.20 TB"
std::string human_bytes(double bytes);

}  // namespace sinklm
