#include "core/progress_meter.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sinklm {

std::string with_thousands(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

std::string clock_time(double seconds) {
  const auto s = static_cast<long long>(seconds < 0 ? 0 : seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  return text;
}

bool ProgressMeter::enabled() {
  const char* asked = std::getenv("SINKLM_PROGRESS");
  if (asked && std::strcmp(asked, "1") == 0) return true;
  if (asked && std::strcmp(asked, "0") == 0) return false;
  return ::isatty(STDERR_FILENO) == 1;
}

ProgressMeter::ProgressMeter(std::string label, uint64_t total, std::string unit, double every_seconds)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      every_seconds_(every_seconds),
      enabled_(enabled()),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void ProgressMeter::update(uint64_t done) {
  if (!enabled_ || seconds_between(last_, std::chrono::steady_clock::now()) < every_seconds_) return;
  print(done, false);
}

void ProgressMeter::finish() {
  if (enabled_ && printed_) print(total_, true);
}

void ProgressMeter::print(uint64_t done, bool last) {
  last_ = std::chrono::steady_clock::now();
  printed_ = true;
  const double elapsed = seconds_between(start_, last_), rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  const double percent = total_ > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0;
  std::string line = label_ + ": " + with_thousands(done) + "/" + with_thousands(total_) + " " + unit_;
  char tail[96];
  std::snprintf(tail, sizeof tail, " (%.1f%%) | %.0f/s", percent, rate);
  line += tail;
  if (last) line += " | took " + clock_time(elapsed);
  else if (rate > 0) line += " | ETA " + clock_time(static_cast<double>(total_ - done) / rate);
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace sinklm
