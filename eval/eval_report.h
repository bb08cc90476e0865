// The results of `sinklm eval` as a file and as tables.
//
// results.json: {"format": "sinklm-eval", "version": 1, "checkpoint": "...", "sink_mode": "...",
//                "tokenizer": "...", "data": "...", "limit": N,
//                "results": [{"task", "metric", "value", "stderr", "n", "proxy"}, ...]}
// Accuracies are fractions in the file and percentages in the tables. Proxy tasks (derived from sinklm's
// held-out corpus) are marked in every table.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/task_metrics.h"

namespace sinklm {

// `header` holds the run's description (checkpoint, sink_mode, ...); the results are added under "results".
nlohmann::json results_json(nlohmann::json header, const std::vector<MetricResult>& results);
// Reads a results.json; UserError naming `path` if it is not one.
std::vector<MetricResult> read_results_file(const std::string& path);

std::string results_markdown(const std::vector<MetricResult>& results);
// Side by side on the (task, metric) pairs of either run, with B - A and its z score (difference over the
// combined stderr).
std::string comparison_markdown(const std::string& name_a, const std::vector<MetricResult>& a,
                                const std::string& name_b, const std::vector<MetricResult>& b);

}  // namespace sinklm
