// sinklm eval: zero-shot scoring of a checkpoint with lm-eval's semantics (eval/zero_shot/loglikelihood_scorer.h,
// eval/zero_shot/task_metrics.h) on the official sets shipped inside sinklm (eval/zero_shot/tasks/benchmark_data.h) or on task files
// given with --data (eval/zero_shot/tasks/task_formats.h); the results file and tables (eval/zero_shot/eval_report.h), the paired
// --compare of two results (eval/zero_shot/paired_comparison.h), and `eval build-tasks` (eval/zero_shot/tasks/proxy_tasks.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/config/args.h"
#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "eval/zero_shot/tasks/benchmark_data.h"
#include "eval/zero_shot/eval_report.h"
#include "eval/zero_shot/loglikelihood_scorer.h"
#include "eval/zero_shot/tasks/proxy_tasks.h"
#include "eval/zero_shot/tasks/task_formats.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

// A results file, or a run directory that holds results.json.
std::string results_path(const std::string& path) {
  return fs::is_directory(path) ? (fs::path(path) / "results.json").string() : path;
}

std::string markdown_path(const std::string& json_path) {
  return fs::path(json_path).replace_extension(".md").string();
}

// Every flag of `eval`, bound to what it sets.
struct EvalFlags {
  ModelFlags model;
  std::string tasks, data, out, samples, compare;
  int64_t limit = 0;  // every document
  int64_t batch = 16;
};

std::vector<FlagSpec> eval_flags(EvalFlags& f) {
  return with_flags(
      {flag(&f.tasks, "tasks", "LIST",
            "comma-separated task names, or all: the seven official sets shipped with sinklm, hellaswag in "
            "llama.cpp's text form (with --data: every known task with a file there)"),
       flag(&f.data, "data", "DIR",
            "score <task>.jsonl files (Hugging Face field names; hellaswag.txt in llama.cpp's text form) from DIR "
            "instead of the shipped official sets; needed for the proxy_* tasks (sinklm eval build-tasks)"),
       flag(&f.out, "out", "FILE", "write results JSON (with per-document outcomes) here and the table beside it (.md)"),
       flag(&f.limit, "limit", "N",
            "first N documents of each task (0: all), for quick runs: all seven official sets take minutes even "
            "for a tiny model (docs/evaluation.md, Cost)", Range{0, 1e12}),
       flag(&f.batch, "batch", "N", "requests per forward pass; results do not depend on it", Range{1, 1 << 20}),
       flag(&f.samples, "samples", "FILE", "write per-document log-probs and predictions (JSONL)"),
       flag(&f.compare, "compare", "RUN_A",
            "with a second positional RUN_B: both results per task, B - A, its paired standard error and whether "
            "it exceeds 2 SE")},
      {model_flags(f.model)});
}

int compare(const EvalFlags& f, const Args& args) {
  if (args.positionals().size() != 1) fail("--compare RUN_A RUN_B: give two results files (or run directories)");
  const std::string a = results_path(f.compare), b = results_path(args.positionals()[0]);
  std::cout << comparison_markdown(a, read_results_file(a), b, read_results_file(b));
  return 0;
}

int score_tasks(const EvalFlags& f, const Args& args) {
  const std::string& data = f.data;
  const std::vector<std::string> tasks = task_list(args.require("tasks"), data);
  const int64_t limit = f.limit;
  std::vector<ZeroShotTask> loaded_tasks;
  for (const auto& name : tasks)  // all inputs checked before the model loads
    loaded_tasks.push_back(data.empty() ? load_official_task(name, limit) : load_task(name, data, limit));

  InferenceModel m = open_inference_model(f.model);
  LoglikelihoodScorer scorer(m.loaded.model, *m.codec, f.batch);
  std::ofstream samples;
  if (!f.samples.empty()) {
    samples.open(f.samples);
    if (!samples) fail("--samples ", f.samples, ": cannot create");
  }

  std::vector<MetricResult> results;
  for (const ZeroShotTask& task : loaded_tasks) {
    std::vector<LoglikelihoodRequest> requests;
    for (const auto& doc : task.docs) requests.insert(requests.end(), doc.requests.begin(), doc.requests.end());
    const std::string variant = task_variant(task.name).label;
    std::cerr << "[eval] " << task.name << (variant.empty() ? "" : " (" + variant + ")") << ": " << task.docs.size()
              << " documents, " << requests.size() << " requests\n";
    std::vector<ContinuationScore> flat = scorer.score(requests, "[eval] " + task.name);
    const auto windowed =
        std::count_if(flat.begin(), flat.end(), [](const ContinuationScore& s) { return s.windows > 1; });
    if (windowed > 0)
      std::cerr << "[eval] " << task.name << ": " << windowed << " continuations longer than the model's "
                << m.loaded.model->config().max_position_embeddings << " positions, scored in pieces\n";
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
        line["windows"].push_back(s.windows);
      }
      samples << line.dump() << "\n";
    }
  }

  const std::string markdown = results_markdown(results);
  std::cout << markdown;
  if (!f.out.empty()) {
    const ModelConfig& config = m.loaded.model->config();
    nlohmann::json header = {{"checkpoint", m.checkpoint},
                             {"sink_mode", sink_mode_name(config.sink_mode)},
                             {"sink_count", config.sink_count},
                             {"tokenizer", m.codec->description()},
                             {"data", data.empty() ? "official sets embedded in sinklm (eval/benchmarks)" : data},
                             {"limit", limit}};
    const std::string& out = f.out;
    write_file_durable(out, results_file_text(results_json(header, results)));
    write_file_durable(markdown_path(out), markdown);
    std::cerr << "[eval] wrote " << out << " and " << markdown_path(out) << "\n";
  }
  return 0;
}

int build_tasks(const std::vector<std::string>& argv) {
  std::string corpus, out;
  ProxyTaskOptions options;
  Args args("eval build-tasks", "--corpus DIR --out DIR [--seed N] [--max-per-task N]",
            {flag(&corpus, "corpus", "DIR", "prepared corpus (sinklm prepare corpus); its validation and test splits are used"),
             flag(&out, "out", "DIR", "directory for proxy_*.jsonl and manifest.json (replaced atomically)"),
             flag(&options.seed, "seed", "N", "seed of every random choice", Range{0, 1e15}),
             flag(&options.max_per_task, "max-per-task", "N", "documents per task at most", Range{1, 1e12})},
            argv);
  if (args.print_help_if_requested()) return 0;
  auto counts = build_proxy_tasks(args.require("corpus"), args.require("out"), options);
  for (const auto& [task, n] : counts) std::cout << task << ": " << n << " documents (proxy)\n";
  return 0;
}

}  // namespace

int run_eval_command(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "build-tasks") return build_tasks({argv.begin() + 1, argv.end()});
  EvalFlags f;
  Args args("eval",
            "--checkpoint DIR --tasks LIST [--data DIR] [--out results.json] [--limit N] [--batch N]\n"
            "       sinklm eval --compare RUN_A RUN_B   (paired differences per task)\n"
            "       sinklm eval build-tasks --corpus DIR --out DIR   (proxy tasks from held-out text)",
            eval_flags(f), argv);
  if (args.print_help_if_requested()) {
    if (args.markdown_requested()) {  // docs/cli.md: build-tasks too
      std::cout << "\n### sinklm eval build-tasks\n\nProxy tasks from a prepared corpus's held-out text.\n\n";
      return build_tasks({kMarkdownHelp});
    }
    std::cout << "\ntasks: ";
    for (const auto& name : known_task_names()) std::cout << name << " ";
    std::cout << "\n";
    return 0;
  }
  if (args.has("compare")) return compare(f, args);
  return score_tasks(f, args);
}

}  // namespace sinklm
