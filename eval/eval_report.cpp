#include "eval/eval_report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"

namespace sinklm {
namespace {

const char* const kProxyNote =
    "\n*proxy*: derived by `sinklm eval build-tasks` from sinklm's held-out corpus split; not the official data "
    "set and not comparable to published numbers.\n";

bool is_accuracy(const std::string& metric) { return metric != "perplexity"; }

// Accuracies as percentages (2 decimals), perplexities as they are.
std::string shown(const std::string& metric, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", is_accuracy(metric) ? 100 * value : value);
  return buf;
}

std::string task_label(const MetricResult& r) { return r.proxy ? r.task + " *(proxy)*" : r.task; }

bool any_proxy(const std::vector<MetricResult>& results) {
  for (const auto& r : results)
    if (r.proxy) return true;
  return false;
}

}  // namespace

nlohmann::json results_json(nlohmann::json header, const std::vector<MetricResult>& results) {
  header["format"] = "sinklm-eval";
  header["version"] = 1;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : results)
    list.push_back({{"task", r.task},
                    {"metric", r.metric},
                    {"value", r.value},
                    {"stderr", r.standard_error},
                    {"n", r.n},
                    {"proxy", r.proxy}});
  header["results"] = list;
  return header;
}

std::vector<MetricResult> read_results_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open results file (written by sinklm eval --out)");
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.value("format", "") != "sinklm-eval") fail(path, ": not a sinklm eval results file (format != sinklm-eval)");
    std::vector<MetricResult> out;
    for (const auto& r : j.at("results"))
      out.push_back({r.at("task").get<std::string>(), r.at("metric").get<std::string>(), r.at("value").get<double>(),
                     r.at("stderr").get<double>(), r.at("n").get<int64_t>(), r.at("proxy").get<bool>()});
    return out;
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": malformed results file: ", e.what());
  }
}

std::string results_markdown(const std::vector<MetricResult>& results) {
  std::ostringstream out;
  out << "| task | metric | value | stderr | n |\n|---|---|---:|---:|---:|\n";
  for (const auto& r : results)
    out << "| " << task_label(r) << " | " << r.metric << (is_accuracy(r.metric) ? " (%)" : "") << " | "
        << shown(r.metric, r.value) << " | " << shown(r.metric, r.standard_error) << " | " << r.n << " |\n";
  if (any_proxy(results)) out << kProxyNote;
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
      << "| task | metric | A | B | B - A | z |\n|---|---|---:|---:|---:|---:|\n";
  for (const auto& [ra, rb] : rows) {
    const MetricResult& any = ra ? *ra : *rb;
    out << "| " << task_label(any) << " | " << any.metric << (is_accuracy(any.metric) ? " (%)" : "") << " | "
        << (ra ? shown(any.metric, ra->value) : "-") << " | " << (rb ? shown(any.metric, rb->value) : "-") << " | ";
    if (ra && rb) {
      const double se = std::sqrt(ra->standard_error * ra->standard_error + rb->standard_error * rb->standard_error);
      char z[32] = "-";
      if (se > 0) std::snprintf(z, sizeof z, "%+.2f", (rb->value - ra->value) / se);
      std::string diff = shown(any.metric, rb->value - ra->value);
      out << (diff[0] == '-' ? "" : "+") << diff << " | " << z << " |\n";
    } else {
      out << "- | - |\n";
    }
  }
  std::vector<MetricResult> all = a;
  all.insert(all.end(), b.begin(), b.end());
  if (any_proxy(all)) out << kProxyNote;
  return out.str();
}

}  // namespace sinklm
