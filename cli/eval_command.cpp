// sinklm eval: zero-shot scoring of a checkpoint on task files (eval/task_formats.h) with lm-eval's semantics
// (eval/loglikelihood_scorer.h, eval/task_metrics.h), the results file and tables (eval/eval_report.h),
// --compare of two results, and `eval build-tasks` (eval/proxy_tasks.h).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/args.h"
#include "core/atomic_dir.h"
#include "core/error.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "eval/eval_report.h"
#include "eval/loglikelihood_scorer.h"
#include "eval/proxy_tasks.h"
#include "eval/task_formats.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

std::vector<std::string> task_list(const std::string& list, const std::string& data_dir) {
  std::vector<std::string> tasks;
  if (list == "all") {  // every known task whose file is present
    for (const auto& name : known_task_names())
      if (fs::exists(task_file(data_dir, name))) tasks.push_back(name);
    if (tasks.empty()) fail("--data ", data_dir, ": no <task>.jsonl files of known tasks (--tasks all)");
    return tasks;
  }
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) tasks.push_back(name);
  if (tasks.empty()) fail("--tasks: empty list");
  return tasks;
}

// A results file, or a run directory that holds results.json.
std::string results_path(const std::string& path) {
  return fs::is_directory(path) ? (fs::path(path) / "results.json").string() : path;
}

std::string markdown_path(const std::string& json_path) {
  return fs::path(json_path).replace_extension(".md").string();
}

int compare(const Args& args) {
  if (args.positionals().size() != 1) fail("--compare RUN_A RUN_B: give two results files (or run directories)");
  const std::string a = results_path(args.get("compare")), b = results_path(args.positionals()[0]);
  std::cout << comparison_markdown(a, read_results_file(a), b, read_results_file(b));
  return 0;
}

int score_tasks(const Args& args) {
  const std::string data = args.require("data");
  const std::vector<std::string> tasks = task_list(args.require("tasks"), data);
  const int64_t limit = args.get_int("limit", 0);
  std::vector<ZeroShotTask> loaded_tasks;
  for (const auto& name : tasks) loaded_tasks.push_back(load_task(name, data, limit));  // all inputs checked first

  InferenceModel m = open_inference_model(args);
  LoglikelihoodScorer scorer(m.loaded.model, *m.codec, args.get_int("batch", 16));
  std::ofstream samples;
  if (args.has("samples")) {
    samples.open(args.get("samples"));
    if (!samples) fail("--samples ", args.get("samples"), ": cannot create");
  }

  std::vector<MetricResult> results;
  for (const ZeroShotTask& task : loaded_tasks) {
    std::vector<LoglikelihoodRequest> requests;
    for (const auto& doc : task.docs) requests.insert(requests.end(), doc.requests.begin(), doc.requests.end());
    std::cerr << "[eval] " << task.name << ": " << task.docs.size() << " documents, " << requests.size()
              << " requests\n";
    std::vector<ContinuationScore> flat = scorer.score(requests);
    std::vector<std::vector<ContinuationScore>> per_doc;
    size_t next = 0;
    for (const auto& doc : task.docs) {
      per_doc.emplace_back(flat.begin() + next, flat.begin() + next + doc.requests.size());
      next += doc.requests.size();
    }
    for (const auto& r : task_metrics(task, per_doc)) results.push_back(r);
    for (size_t d = 0; samples.is_open() && d < per_doc.size(); ++d) {
      DocumentOutcome o = document_outcome(task, d, per_doc[d]);
      nlohmann::json line = {
          {"task", task.name}, {"doc", d}, {"gold", task.docs[d].gold}, {"pred", o.pred}, {"pred_norm", o.pred_norm}};
      for (const auto& s : per_doc[d]) {
        line["logprobs"].push_back(s.logprob);
        line["greedy"].push_back(s.greedy);
        line["tokens"].push_back(s.tokens);
      }
      samples << line.dump() << "\n";
    }
  }

  const std::string markdown = results_markdown(results);
  std::cout << markdown;
  if (args.has("out")) {
    const ModelConfig& config = m.loaded.model->config();
    nlohmann::json header = {{"checkpoint", m.checkpoint},
                             {"sink_mode", sink_mode_name(config.sink_mode)},
                             {"sink_count", config.sink_count},
                             {"tokenizer", m.codec->description()},
                             {"data", data},
                             {"limit", limit}};
    const std::string out = args.get("out");
    write_file_durable(out, results_json(header, results).dump(2) + "\n");
    write_file_durable(markdown_path(out), markdown);
    std::cerr << "[eval] wrote " << out << " and " << markdown_path(out) << "\n";
  }
  return 0;
}

int build_tasks(const std::vector<std::string>& argv) {
  Args args("eval build-tasks", "--corpus DIR --out DIR [--seed N] [--max-per-task N]",
            {{"corpus", "DIR", "prepared corpus (sinklm prepare corpus); its validation and test splits are used"},
             {"out", "DIR", "directory for proxy_*.jsonl and manifest.json (replaced atomically)"},
             {"seed", "N", "seed of every random choice (default 1234)"},
             {"max-per-task", "N", "documents per task at most (default 1000)"}},
            argv);
  if (args.print_help_if_requested()) return 0;
  ProxyTaskOptions options;
  options.seed = static_cast<uint64_t>(args.get_int("seed", 1234));
  options.max_per_task = args.get_int("max-per-task", 1000);
  auto counts = build_proxy_tasks(args.require("corpus"), args.require("out"), options);
  for (const auto& [task, n] : counts) std::cout << task << ": " << n << " documents (proxy)\n";
  return 0;
}

}  // namespace

int run_eval_command(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "build-tasks") return build_tasks({argv.begin() + 1, argv.end()});
  Args args("eval",
            "--checkpoint DIR --tasks LIST --data DIR [--out results.json] [--limit N] [--batch N]\n"
            "       sinklm eval --compare RUN_A RUN_B\n"
            "       sinklm eval build-tasks --corpus DIR --out DIR   (proxy tasks from held-out text)",
            with_flags(
                {{"tasks", "LIST", "comma-separated task names, or all (every known task with a file in --data)"},
                 {"data", "DIR", "directory of <task>.jsonl files (Hugging Face field names)"},
                 {"out", "FILE", "write results JSON here and the markdown table beside it (.md)"},
                 {"limit", "N", "first N documents of each task (default all)"},
                 {"batch", "N", "requests per forward pass (default 16); results do not depend on it"},
                 {"samples", "FILE", "write per-document log-probs and predictions (JSONL)"},
                 {"compare", "RUN_A", "with a second positional RUN_B: print two results side by side"}},
                {model_flags()}),
            argv);
  if (args.help_requested()) {
    std::cout << args.usage() << "\ntasks: ";
    for (const auto& name : known_task_names()) std::cout << name << " ";
    std::cout << "\n";
    return 0;
  }
  if (args.has("compare")) return compare(args);
  return score_tasks(args);
}

}  // namespace sinklm
