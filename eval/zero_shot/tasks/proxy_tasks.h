// Proxy zero-shot tasks, because the official sets cannot be fetched here: `sinklm eval build-tasks` derives
// them deterministically (same corpus + seed -> same bytes) from the held-out documents (validation and
// test splits) of a prepared corpus, in the official JSONL formats (eval/zero_shot/tasks/task_formats.h):
//
//   proxy_lambada.jsonl      lambada_openai format {"text"}: a passage of 20-150 words from prose
//                            (Bible, fortunes, kernel docs) ending at a sentence whose last word is the target
//   proxy_hellaswag.jsonl    hellaswag format: ctx_a = a sentence, endings = the true next sentence and three
//                            sentences from other documents, label = position of the true one
//   proxy_definitions.jsonl  ARC format: "Which word is defined as: <gloss>?" with the headword and three
//                            other headwords, from WordNet synsets and GCIDE / Devil's Dictionary entries
//   manifest.json            {"format": "sinklm-proxy-tasks", "proxy": true, "corpus", "seed",
//                             "tasks": {name: {"documents", "format", "description"}}}
//
// Documents of a task are drawn round-robin over corpus documents (each document's candidates in a seeded
// order), so no single long document dominates. Every report labels these tasks as proxies.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sinklm {

struct ProxyTaskOptions {
  uint64_t seed = 1234;
  int64_t max_per_task = 1000;
};

// Writes the directory atomically; returns (task, documents) in file order. UserError when the held-out
// splits yield no document for any task.
std::vector<std::pair<std::string, int64_t>> build_proxy_tasks(const std::string& corpus_dir,
                                                               const std::string& out_dir,
                                                               const ProxyTaskOptions& options);

}  // namespace sinklm
