#include "data/prepare/prepare_progress.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace sinklm {

std::vector<double> PrepareCounters::snapshot(bool finished) const {
  return {static_cast<double>(disk_bytes.load()), static_cast<double>(skipped_disk_bytes.load()),
          static_cast<double>(input_bytes.load()), static_cast<double>(tokens.load()),
          static_cast<double>(documents.load()), static_cast<double>(bad_lines.load()),
          static_cast<double>(records.load()), finished ? 1.0 : 0.0};
}

ProgressTotals ProgressTotals::from_snapshot(const std::vector<double>& sums) {
  SINKLM_ASSERT(sums.size() == 8, "progress snapshot has ", sums.size(), " values");
  return {sums[0], sums[1], sums[2], sums[3], sums[4], sums[5], sums[6], sums[7]};
}

ProgressMonitor::ProgressMonitor(const PrepareCounters& counters, Reduce reduce, int world_size,
                                 double total_disk_bytes, double max_bad_fraction, double print_seconds,
                                 std::ostream* out)
    : counters_(counters),
      reduce_(std::move(reduce)),
      world_size_(world_size),
      total_disk_bytes_(total_disk_bytes),
      max_bad_fraction_(max_bad_fraction),
      print_seconds_(print_seconds),
      out_(out),
      start_(std::chrono::steady_clock::now()),
      thread_([this] { rounds(); }) {}

ProgressMonitor::~ProgressMonitor() {
  if (thread_.joinable()) finish();
}

double ProgressMonitor::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressMonitor::rounds() {
  double last_print = 0;
  for (;;) {
    for (int i = 0; i < 5 && !finished_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<double> sums = counters_.snapshot(finished_);
    reduce_(sums);
    totals_ = ProgressTotals::from_snapshot(sums);
    if (totals_.records >= 10000 && totals_.bad_lines > max_bad_fraction_ * totals_.records) stop_ = true;
    const bool all_done = totals_.finished_ranks >= world_size_;
    if (out_ && (seconds() - last_print >= print_seconds_ || all_done)) {
      *out_ << progress_line(totals_, total_disk_bytes_, seconds()) << "\n" << std::flush;
      last_print = seconds();
    }
    if (all_done) return;
  }
}

ProgressTotals ProgressMonitor::finish() {
  finished_ = true;
  thread_.join();
  return totals_;
}

std::string human_bytes(double bytes) {
  char out[32];
  if (bytes < 1e6) std::snprintf(out, sizeof(out), "%.0f kB", bytes / 1e3);
  else if (bytes < 1e9) std::snprintf(out, sizeof(out), "%.1f MB", bytes / 1e6);
  else if (bytes < 1e12) std::snprintf(out, sizeof(out), "%.2f GB", bytes / 1e9);
  else std::snprintf(out, sizeof(out), "%.2f TB", bytes / 1e12);
  return out;
}

std::string progress_line(const ProgressTotals& t, double total_disk_bytes, double seconds) {
  const double done = total_disk_bytes > 0 ? t.disk_bytes / total_disk_bytes : 1.0;
  const double worked = t.disk_bytes - t.skipped_disk_bytes;
  const double rate_disk = seconds > 0 ? worked / seconds : 0;
  const std::string eta = done >= 1            ? clock_time(0)
                          : rate_disk > 0 ? clock_time((total_disk_bytes - t.disk_bytes) / rate_disk)
                                          : "-";
  char line[256];
  std::snprintf(line, sizeof(line), "[prepare shards] %.1f%% of %s | %.1f MB/s, %.2fM tokens/s | %s documents, %s bad lines | ETA %s",
                100 * done, human_bytes(total_disk_bytes).c_str(), seconds > 0 ? t.input_bytes / 1e6 / seconds : 0.0,
                seconds > 0 ? t.tokens / 1e6 / seconds : 0.0, with_thousands(static_cast<uint64_t>(t.documents)).c_str(),
                with_thousands(static_cast<uint64_t>(t.bad_lines)).c_str(), eta.c_str());
  return line;
}

}  // namespace sinklm
