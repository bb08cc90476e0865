#include "eval/zero_shot/eval_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "eval/zero_shot/tasks/benchmark_data.h"
#include "eval/zero_shot/paired_comparison.h"
#include "eval/zero_shot/tasks/task_formats.h"

namespace sinklm {
namespace {

const char* const kProxyNote =
    "\n*proxy*: derived by `sinklm eval build-tasks` from sinklm's held-out corpus split; not the official data "
    "set and not comparable to published numbers.\n";
const char* const kOfficialNote =
    "\n*official*: the published evaluation split shipped with sinklm (eval/benchmarks/SOURCES.md), verified by "
    "document count and sha256.\n";
const char* const kPairedNote =
    "\nSE: standard error of B - A from per-document pairs (both runs scored the same documents); > 2 SE: "
    "|B - A| exceeds twice it (about 95%, two-sided).\n";

bool is_accuracy(const std::string& metric) { return metric != "perplexity"; }

// Accuracies as percentages (2 decimals), perplexities as they are.
std::string shown(const std::string& metric, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", is_accuracy(metric) ? 100 * value : value);
  return buf;
}

std::string signed_shown(const std::string& metric, double value) {
  std::string s = shown(metric, value);
  return s[0] == '-' ? s : "+" + s;
}

// The task, and what its data is when that is not lm-eval's: proxy, or a variant (eval/zero_shot/tasks/task_formats.h).
std::string task_label(const MetricResult& r) {
  const std::string variant = task_variant(r.task).label;
  return r.task + (r.proxy ? " *(proxy)*" : "") + (variant.empty() ? "" : " *(" + variant + ")*");
}
std::string metric_label(const std::string& metric) { return metric + (is_accuracy(metric) ? " (%)" : ""); }

// Where the documents came from; an official set scored with --limit says so.
std::string data_label(const MetricResult& r) {
  if (r.proxy) return "proxy";
  if (!r.official) return "--data";
  const OfficialBenchmark* set = find_official_benchmark(r.task);
  if (set && r.n < set->documents) return str("official, first ", r.n, " of ", set->documents);
  return "official";
}

std::string notes(const std::vector<MetricResult>& results) {
  bool proxy = false, official = false;
  std::vector<std::string> variants;  // one note per variant label, in the order the tasks come
  for (const auto& r : results) {
    proxy |= r.proxy;
    official |= r.official;
    const TaskVariant variant = task_variant(r.task);
    if (variant.label.empty()) continue;
    const std::string note = "\n*" + variant.label + "*: " + variant.note + "\n";
    if (std::find(variants.begin(), variants.end(), note) == variants.end()) variants.push_back(note);
  }
  std::string out = std::string(official ? kOfficialNote : "") + (proxy ? kProxyNote : "");
  for (const auto& note : variants) out += note;
  return out;
}

bool all_numbers(const nlohmann::json& j) {
  return std::all_of(j.begin(), j.end(), [](const nlohmann::json& v) { return v.is_number(); });
}

// dump(2)'s layout, except that lists of numbers stay on one line.
void write_json(std::ostream& out, const nlohmann::json& j, int indent) {
  const std::string pad(indent, ' '), inner(indent + 2, ' ');
  if (j.is_object() && !j.empty()) {
    out << "{\n";
    size_t i = 0;
    for (auto it = j.begin(); it != j.end(); ++it, ++i) {
      out << inner << nlohmann::json(it.key()).dump() << ": ";
      write_json(out, it.value(), indent + 2);
      out << (i + 1 < j.size() ? ",\n" : "\n");
    }
    out << pad << "}";
  } else if (j.is_array() && !j.empty() && !all_numbers(j)) {
    out << "[\n";
    for (size_t i = 0; i < j.size(); ++i) {
      out << inner;
      write_json(out, j[i], indent + 2);
      out << (i + 1 < j.size() ? ",\n" : "\n");
    }
    out << pad << "]";
  } else {
    out << j.dump();
  }
}

// A uniform guess's expected score, the mean over documents of 1/choices; null where there is none.
nlohmann::json chance(const MetricResult& r) {
  if (r.choices.empty()) return nullptr;
  double sum = 0;
  for (const int64_t c : r.choices) sum += 1.0 / static_cast<double>(c);
  return sum / static_cast<double>(r.choices.size());
}

}  // namespace

nlohmann::json results_json(nlohmann::json header, const std::vector<MetricResult>& results) {
  header["format"] = "sinklm-eval";
  header["version"] = 1;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json per_document = nlohmann::json::array();
    for (double v : r.per_document)  // accuracies as 0/1, log-probs in full precision
      per_document.push_back(v == std::trunc(v) && std::abs(v) < 1e15 ? nlohmann::json(static_cast<int64_t>(v))
                                                                      : nlohmann::json(v));
    list.push_back({{"task", r.task},
                    {"metric", r.metric},
                    {"value", r.value},
                    {"stderr", r.standard_error},
                    {"n", r.n},
                    {"proxy", r.proxy},
                    {"official", r.official},
                    {"data_sha256", r.data_sha256},
                    {"per_document", per_document},
                    {"chance", chance(r)},
                    {"choices_per_document", r.choices}});
  }
  header["results"] = list;
  return header;
}

std::string results_file_text(const nlohmann::json& results) {
  std::ostringstream out;
  write_json(out, results, 0);
  out << "\n";
  return out.str();
}

std::vector<MetricResult> read_results_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open results file (written by sinklm eval --out)");
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.value("format", "") != "sinklm-eval") fail(path, ": not a sinklm eval results file (format != sinklm-eval)");
    std::vector<MetricResult> out;
    for (const auto& r : j.at("results")) {
      MetricResult m{r.at("task").get<std::string>(), r.at("metric").get<std::string>(), r.at("value").get<double>(),
                     r.at("stderr").get<double>(),    r.at("n").get<int64_t>(),           r.at("proxy").get<bool>()};
      // Files written before these fields existed still read; they just cannot be paired.
      m.official = r.value("official", false);
      m.data_sha256 = r.value("data_sha256", "");
      m.per_document = r.value("per_document", std::vector<double>{});
      m.choices = r.value("choices_per_document", std::vector<int64_t>{});
      out.push_back(std::move(m));
    }
    return out;
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": malformed results file: ", e.what());
  }
}

std::string results_markdown(const std::vector<MetricResult>& results) {
  std::ostringstream out;
  out << "| task | metric | value | stderr | n | data |\n|---|---|---:|---:|---:|---|\n";
  for (const auto& r : results)
    out << "| " << task_label(r) << " | " << metric_label(r.metric) << " | " << shown(r.metric, r.value) << " | "
        << shown(r.metric, r.standard_error) << " | " << r.n << " | " << data_label(r) << " |\n";
  out << notes(results);
  return out.str();
}

std::string comparison_markdown(const std::string& name_a, const std::vector<MetricResult>& a,
                                const std::string& name_b, const std::vector<MetricResult>& b) {
  using Key = std::pair<std::string, std::string>;
  std::map<Key, const MetricResult*> in_b;
  for (const auto& r : b) in_b[{r.task, r.metric}] = &r;
  std::vector<std::pair<const MetricResult*, const MetricResult*>> rows;
  for (const auto& r : a) {
    auto it = in_b.find({r.task, r.metric});
    rows.push_back({&r, it == in_b.end() ? nullptr : it->second});
    if (it != in_b.end()) in_b.erase(it);
  }
  for (const auto& r : b)
    if (in_b.count({r.task, r.metric})) rows.push_back({nullptr, &r});

  std::ostringstream out;
  out << "A: " << name_a << "\nB: " << name_b << "\n\n"
      << "| task | metric | A | B | B - A | SE | > 2 SE | n | data |\n|---|---|---:|---:|---:|---:|---|---:|---|\n";
  for (const auto& [ra, rb] : rows) {
    const MetricResult& any = ra ? *ra : *rb;
    out << "| " << task_label(any) << " | " << metric_label(any.metric) << " | "
        << (ra ? shown(any.metric, ra->value) : "-") << " | " << (rb ? shown(any.metric, rb->value) : "-") << " | ";
    if (!ra || !rb) {
      out << "- | - | - | " << any.n << " | " << data_label(any) << " |\n";
      continue;
    }
    out << signed_shown(any.metric, rb->value - ra->value) << " | ";
    const std::string why = unpaired_reason(*ra, *rb);
    if (why.empty()) {
      const PairedDifference p = paired_difference(*ra, *rb);
      out << shown(any.metric, p.standard_error) << " | " << (p.significant ? "yes" : "no");
    } else {
      out << "- | not paired: " << why;
    }
    out << " | " << (ra->n == rb->n ? str(ra->n) : str(ra->n, " / ", rb->n)) << " | " << data_label(*ra) << " |\n";
  }
  std::vector<MetricResult> all = a;
  all.insert(all.end(), b.begin(), b.end());
  out << kPairedNote << notes(all);
  return out.str();
}

}  // namespace sinklm
