// The official zero-shot evaluation splits that ship with sinklm: ARC-Challenge, ARC-Easy, LAMBADA (OpenAI),
// OpenBookQA, PIQA and Winogrande, in lm-eval's field layout (origins, licences and checks in
// eval/benchmarks/SOURCES.md). They live gzip-compressed in eval/benchmarks/ and are embedded in the binary
// when it is built (eval/benchmark_blobs.h), so `sinklm eval --tasks all` scores them on any machine with no
// --data and no source tree. Every load checks the decompressed set against its document count and sha256,
// so a damaged copy or a stale build is an error naming the file, never a silently different score.
// HellaSwag is not among them: its official split could not be obtained (SOURCES.md).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eval/task_formats.h"

namespace sinklm {

struct OfficialBenchmark {
  const char* task;   // lm-eval task name, as --tasks spells it
  int64_t documents;  // documents (lines) of the official split
  const char* sha256;  // of the decompressed <task>.jsonl, as SOURCES.md lists it
};

const std::vector<OfficialBenchmark>& official_benchmarks();
// nullptr when sinklm ships no official copy of `task`.
const OfficialBenchmark* find_official_benchmark(const std::string& task);
// The compressed set's path in the source tree, for messages.
std::string official_benchmark_file(const std::string& task);

// Decompresses `compressed` (gzip) and checks it against `expected`. UserError naming `origin` on corrupt or
// missing data, a wrong document count or a wrong sha256. Returns the JSONL text.
std::string verified_benchmark_text(const OfficialBenchmark& expected, std::string_view compressed,
                                    const std::string& origin);

// The first `limit` documents (0 = all) of the embedded official split of `task`, verified in full first.
// UserError for a task with no official copy, with a --data hint.
ZeroShotTask load_official_task(const std::string& task, int64_t limit);

}  // namespace sinklm
