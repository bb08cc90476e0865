// The official zero-shot evaluation splits that ship with sinklm: ARC-Challenge, ARC-Easy, LAMBADA (OpenAI),
// OpenBookQA, PIQA and Winogrande in lm-eval's field layout, and HellaSwag's validation items in llama.cpp's
// text form (eval/zero_shot/tasks/hellaswag_text.h; origins, licences and checks in eval/benchmarks/SOURCES.md). They live
// gzip-compressed in eval/benchmarks/ as <task file name>.gz and are embedded in the binary when it is built
// (eval/zero_shot/tasks/benchmark_blobs.h), so `sinklm eval --tasks all` scores them on any machine with no --data and no
// source tree. Every load checks the decompressed set against its line count and sha256, so a damaged copy
// or a stale build is an error naming the file, never a silently different score.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "eval/zero_shot/tasks/task_formats.h"

namespace sinklm {

struct OfficialBenchmark {
  const char* task;            // lm-eval task name, as --tasks spells it
  int64_t documents;           // documents of the official split
  int64_t lines_per_document;  // non-blank lines: 1 in JSONL, 6 in llama.cpp's HellaSwag text form
  const char* sha256;          // of the decompressed file, as SOURCES.md lists it
};

const std::vector<OfficialBenchmark>& official_benchmarks();
// nullptr when sinklm ships no official copy of `task`.
const OfficialBenchmark* find_official_benchmark(const std::string& task);
// The compressed set's path in the source tree, eval/benchmarks/<task file name>.gz, for messages.
std::string official_benchmark_file(const std::string& task);

// Decompresses `compressed` (gzip) and checks it against `expected`. UserError naming `origin` on corrupt or
// missing data, a wrong line count or a wrong sha256. Returns the text.
std::string verified_benchmark_text(const OfficialBenchmark& expected, std::string_view compressed,
                                    const std::string& origin);

// The first `limit` documents (0 = all) of the embedded official split of `task`, verified in full first.
// UserError for a task with no official copy, with a --data hint.
ZeroShotTask load_official_task(const std::string& task, int64_t limit);

// The tasks a list names (`eval --tasks`, `train.eval_tasks`): comma-separated names, or `all`: the official sets
// shipped with sinklm, or with `data_dir` every known task whose file is there. UserError for an empty list.
std::vector<std::string> task_list(const std::string& list, const std::string& data_dir = "");

}  // namespace sinklm
