// Zero-shot tasks as lm-evaluation-harness (v0.4) poses them: each document becomes log-likelihood requests
// (context, continuation), scored by the model; metrics come from the per-request scores.
//
// Files: <data>/<task>.jsonl (or the official sets shipped with sinklm, eval/zero_shot/tasks/benchmark_data.h), one document
// per line with the Hugging Face datasets field names:
//   arc_challenge, arc_easy   {"id", "question", "choices": {"text": [..], "label": [..]}, "answerKey"}
//   lambada_openai            {"text"}
//   openbookqa                {"id", "question_stem", "choices": {"text", "label"}, "answerKey"}
//   piqa                      {"goal", "sol1", "sol2", "label": 0|1}
//   winogrande                {"sentence" (one "_"), "option1", "option2", "answer": "1"|"2"}
// except hellaswag: <data>/hellaswag.txt in llama.cpp's text form, six lines per item (eval/zero_shot/tasks/hellaswag_text.h);
// and the proxies written by `sinklm eval build-tasks` (eval/zero_shot/tasks/proxy_tasks.h):
//   proxy_lambada (lambada format), proxy_definitions (ARC format), proxy_hellaswag (HellaSwag's Hugging Face
//   layout {"activity_label", "ctx_a", "ctx_b", "endings": [4], "label": "0".."3", ...}, with lm-eval's
//   hellaswag preprocessing).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

struct LoglikelihoodRequest {
  std::string context;
  std::string continuation;
};

enum class TaskScoring {
  MultipleChoice,  // one request per choice, same context: acc (summed log-prob) and acc_norm (per character)
  PartialScoring,  // Winogrande: one request per option filled into the context, same continuation: acc
  LastWord,        // LAMBADA: one request; acc = continuation is the greedy decode, perplexity of the word
};

struct TaskDocument {
  std::vector<LoglikelihoodRequest> requests;  // one per choice (LastWord: exactly one)
  std::vector<std::string> choices;            // MultipleChoice: the choice texts that normalise acc_norm
  int gold = 0;                                // index of the correct request
};

// MultipleChoice with a shared context: one request per choice, continuation = " " + choice (lm-eval's
// target_delimiter).
TaskDocument multiple_choice(const std::string& context, const std::vector<std::string>& choices, int gold);

struct ZeroShotTask {
  std::string name;
  std::string file;
  TaskScoring scoring = TaskScoring::MultipleChoice;
  bool proxy = false;     // derived from sinklm's held-out corpus, not the official data set
  bool official = false;  // the verified official split shipped with sinklm (eval/zero_shot/tasks/benchmark_data.h)
  std::string data_sha256;  // of the whole task file: with the document count, says which documents were scored
  std::vector<TaskDocument> docs;
};

// Every task name `--tasks` accepts, official first.
const std::vector<std::string>& known_task_names();
// <task>.jsonl, or hellaswag.txt: the name of the task's file in a --data directory.
std::string task_file_name(const std::string& task);
std::string task_file(const std::string& data_dir, const std::string& task);

// A task whose documents are not the text lm-eval scores under that name (hellaswag: llama.cpp's text form),
// labelled so in every table; both empty for every other task and for names sinklm does not know.
struct TaskVariant {
  std::string label;  // "llama.cpp text form"
  std::string note;   // how the text differs, one sentence
};
TaskVariant task_variant(const std::string& task);

// UserError listing the known tasks when `task` is not one.
void require_known_task(const std::string& task);

// The first `limit` documents (0 = all) of task_file(data_dir, task). UserError naming file:line and field.
ZeroShotTask load_task(const std::string& task, const std::string& data_dir, int64_t limit);
// The same from the file's `text` already in memory; `origin` names it in errors (origin:line).
ZeroShotTask parse_task(const std::string& task, const std::string& text, const std::string& origin, int64_t limit);

// lm-eval's HellaSwag text cleanup (proxy_hellaswag): strip, " [title]" -> ". ", drop "[...]" spans, "  " -> " ".
std::string hellaswag_preprocess(const std::string& text);

}  // namespace sinklm
