// The results of `sinklm eval` as a file and as tables.
//
// results.json: {"format": "sinklm-eval", "version": 1, "checkpoint": "...", "sink_mode": "...",
//                "tokenizer": "...", "data": "...", "limit": N,
//                "results": [{"task", "metric", "value", "stderr", "n", "proxy", "official", "data_sha256",
//                             "per_document": [...], "chance", "choices_per_document": [...]}, ...]}
// per_document: each document's score (acc: 0/1; perplexity: the word's log-prob); chance: a uniform guess's
// expected acc, mean of 1/choices_per_document (null, and [], for last-word tasks and perplexity).
// (per_document and the two before it are optional when read: older files lack them and cannot be paired;
// older files lack chance and choices_per_document too.)
// Accuracies are fractions in the file and percentages in the tables. Every table says where each task's
// documents came from: official (the verified split shipped with sinklm), proxy (derived from sinklm's
// held-out corpus) or --data (the user's files), and labels a task whose text is not what lm-eval scores under
// its name (hellaswag: llama.cpp text form, eval/zero_shot/tasks/task_formats.h: task_variant).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/zero_shot/task_metrics.h"

namespace sinklm {

// `header` holds the run's description (checkpoint, sink_mode, ...); the results are added under "results".
nlohmann::json results_json(nlohmann::json header, const std::vector<MetricResult>& results);
// The file's text: dump(2)'s layout, but lists of numbers on one line (thousands of per-document values).
std::string results_file_text(const nlohmann::json& results);
// Reads a results.json; UserError naming `path` if it is not one.
std::vector<MetricResult> read_results_file(const std::string& path);

std::string results_markdown(const std::vector<MetricResult>& results);
// Side by side on the (task, metric) pairs of either run, with B - A, the standard error of that difference
// from per-document pairs and whether |B - A| exceeds 2 of them (eval/zero_shot/paired_comparison.h).
std::string comparison_markdown(const std::string& name_a, const std::vector<MetricResult>& a,
                                const std::string& name_b, const std::vector<MetricResult>& b);

}  // namespace sinklm
