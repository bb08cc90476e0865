// A progress line for long work, on stderr at a bounded rate:
//   "[eval] hellaswag: 12,000/40,168 rows (29.9%) | 812/s | ETA 0:00:35"
// Printed only when stderr is a terminal, unless SINKLM_PROGRESS=1 asks for it anyway (a log file, CI);
// SINKLM_PROGRESS=0 silences it. finish() prints the last line with the time taken, when any was printed.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace sinklm {

class ProgressMeter {
 public:
  ProgressMeter(std::string label, uint64_t total, std::string unit, double every_seconds = 5);
  void update(uint64_t done);  // prints when every_seconds passed since the last line
  void finish();

  // Whether progress lines are printed here (the terminal and SINKLM_PROGRESS, as above).
  static bool enabled();

 private:
  void print(uint64_t done, bool last);

  std::string label_, unit_;
  uint64_t total_;
  double every_seconds_;
  bool enabled_, printed_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// "0:01:23" (hours uncapped).
std::string clock_time(double seconds);
// "1,234,567"
std::string with_thousands(uint64_t n);

}  // namespace sinklm
