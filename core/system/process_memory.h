// This process's memory high-water mark, for reports (training log, decode benchmark).
#pragma once
#include <sys/resource.h>

namespace sinklm {

// Peak resident set size in MiB (Linux reports ru_maxrss in KiB).
inline double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace sinklm
