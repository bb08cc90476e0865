// The gzip files of eval/benchmarks/ as bytes inside the sinklm binary (eval/zero_shot/tasks/benchmark_blobs.cpp). Read them
// through eval/zero_shot/tasks/benchmark_data.h, which verifies them.
#pragma once
#include <string>
#include <string_view>

namespace sinklm {

// The embedded <task>.jsonl.gz (hellaswag: hellaswag.txt.gz); empty for a task with no embedded file.
std::string_view embedded_benchmark(const std::string& task);

}  // namespace sinklm
