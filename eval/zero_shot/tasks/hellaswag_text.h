// HellaSwag in llama.cpp's text form: the file `llama-perplexity --hellaswag` reads (llama.cpp's
// examples/perplexity/perplexity.cpp, hellaswag_score), shipped as eval/benchmarks/hellaswag.txt.gz and read
// from <data>/hellaswag.txt with --data. Six lines per item, nothing between items:
//   <activity_label>: <ctx>   the context
//   <gold>                    the index of the right ending: 0, 1, 2 or 3
//   <ending 0>                the four endings, each a continuation of the context
//   <ending 1>
//   <ending 2>
//   <ending 3>
// Each item is scored as lm-eval scores hellaswag: one request per ending, context -> " " + ending, acc by
// the summed log-prob and acc_norm by log-prob per character of the ending. The text is what llama.cpp's
// extractor wrote from the official hellaswag_val.jsonl, not lm-eval's preprocessing of that file (ctx_b is
// not capitalised, the [header]/[step]/[title] tags are cleaned in another way; eval/benchmarks/SOURCES.md),
// so every table labels the task "llama.cpp text form".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eval/zero_shot/tasks/task_formats.h"

namespace sinklm {

// The first `limit` items (0 = all) of `text`. UserError naming origin:line for a text not in this form: a
// count of lines that is not a multiple of six, a gold label other than 0-3, or an empty context or ending.
std::vector<TaskDocument> read_hellaswag_text(const std::string& text, const std::string& origin, int64_t limit);

}  // namespace sinklm
