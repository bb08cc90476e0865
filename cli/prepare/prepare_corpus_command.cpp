// sinklm prepare corpus: English text from Debian packages -> a corpus directory (format: corpus_files.h).
#include <cstdlib>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/config/args.h"
#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "data/corpus/corpus_files.h"
#include "cli/prepare/prepare_steps.h"
#include "data/tokenizers/tokenizer.h"

namespace sinklm {
namespace {

std::string default_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string base = xdg && *xdg ? xdg : str(home && *home ? home : "/tmp", "/.cache");
  return base + "/sinklm/debian-packages";
}

std::vector<const CorpusSource*> chosen_sources(const std::string& list) {
  std::vector<std::string> names;
  for (const auto& s : corpus_sources()) names.push_back(s.name);
  std::vector<const CorpusSource*> chosen;
  if (list.empty()) {
    for (const auto& s : corpus_sources()) chosen.push_back(&s);
    return chosen;
  }
  std::set<std::string> wanted;
  for (size_t start = 0; start <= list.size();) {
    size_t comma = std::min(list.find(',', start), list.size());
    wanted.insert(list.substr(start, comma - start));
    start = comma + 1;
  }
  for (const std::string& name : wanted) {
    bool known = false;
    for (const auto& s : corpus_sources()) known |= s.name == name;
    if (!known) {
      std::string all;
      for (const auto& n : names) all += " " + n;
      fail("--sources: unknown source '", name, "'; known:", all);
    }
  }
  for (const auto& s : corpus_sources())
    if (wanted.count(s.name)) chosen.push_back(&s);
  return chosen;
}

}  // namespace

int prepare_corpus(const std::vector<std::string>& argv) {
  std::string out_dir, sources_list, cache_dir, tokenizer_path;
  uint64_t seed = 1234;
  SplitFractions fractions;
  int64_t max_documents = -1;
  int threads = 0;
  constexpr Range kFraction{0, 0.999};
  Args args("prepare corpus", "--out DIR [--sources a,b] [--cache DIR] [--seed N] [--tokenizer PATH]",
            {flag(&out_dir, "out", "DIR", "corpus directory to write (replaced atomically)"),
             flag(&sources_list, "sources", "LIST", "comma-separated subset of: bible-kjv, wordnet, fortunes, dict-gcide, "
                                                    "dict-jargon, dict-devil, linux-doc (default: all)"),
             flag(&cache_dir, "cache", "DIR", "where .deb files are downloaded and unpacked (default: "
                                              "$XDG_CACHE_HOME or ~/.cache, then /sinklm/debian-packages)"),
             flag(&seed, "seed", "N", "seed of the train/validation/test split", Range{0, 1e15}),
             flag(&fractions.validation, "validation-fraction", "F", "share of documents for validation", kFraction),
             flag(&fractions.test, "test-fraction", "F", "share of documents for test", kFraction),
             flag(&max_documents, "max-documents", "N", "keep at most N documents per source (-1: all), for small test runs",
                  Range{-1, 1e15}),
             flag(&tokenizer_path, "tokenizer", "PATH", "also count each document's tokens with this tokenizer (manifest)"),
             flag(&threads, "threads", "N", "tokenizer threads (0 = all)", Range{0, 4096})},
            argv);
  if (args.print_help_if_requested()) return 0;
  args.require("out");
  DebianPackageCache cache(cache_dir.empty() ? default_cache_dir() : cache_dir);

  nlohmann::json sources = nlohmann::json::array();
  std::vector<CorpusDocument> docs;
  std::vector<std::string> doc_source;
  for (const CorpusSource* source : chosen_sources(sources_list)) {
    std::cerr << "[prepare corpus] " << source->name << ": fetching and extracting\n";
    std::vector<CorpusDocument> extracted = source->extract(cache);
    if (max_documents >= 0 && extracted.size() > static_cast<size_t>(max_documents)) extracted.resize(max_documents);
    nlohmann::json packages = nlohmann::json::array();
    for (const auto& p : source->packages) packages.push_back({{"name", p}, {"version", cache.version(p)}});
    size_t bytes = 0;
    for (auto& d : extracted) {
      bytes += d.text.size();
      doc_source.push_back(source->name);
      docs.push_back(std::move(d));
    }
    sources.push_back({{"name", source->name}, {"debian_packages", packages}, {"licence", source->licence},
                       {"document_unit", source->unit}, {"documents", extracted.size()}, {"bytes", bytes}});
    std::cerr << "[prepare corpus] " << source->name << ": " << extracted.size() << " documents, " << bytes / 1e6 << " MB\n";
  }
  std::vector<std::string> ids;
  for (const auto& d : docs) ids.push_back(d.id);
  SINKLM_ASSERT(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size(), "corpus document ids are not unique");
  std::vector<Split> splits = split_documents(ids, seed, fractions);

  std::vector<TokenIds> tokens;
  std::string tokenizer_description;
  if (!tokenizer_path.empty()) {
    auto tokenizer = load_tokenizer(tokenizer_path);
    tokenizer_description = tokenizer->description();
    std::vector<std::string_view> views(docs.size());
    for (size_t i = 0; i < docs.size(); ++i) views[i] = docs[i].text;
    tokens = encode_documents(*tokenizer, views, threads);
  }

  nlohmann::json documents = nlohmann::json::array(), split_totals = nlohmann::json::object();
  std::map<Split, std::string> jsonl;
  for (Split s : all_splits()) split_totals[split_name(s)] = {{"documents", 0}, {"bytes", 0}};
  for (size_t i = 0; i < docs.size(); ++i) {
    nlohmann::json entry = {{"id", docs[i].id}, {"source", doc_source[i]}, {"split", split_name(splits[i])},
                            {"bytes", docs[i].text.size()}};
    nlohmann::json& total = split_totals[split_name(splits[i])];
    total["documents"] = total["documents"].get<size_t>() + 1;
    total["bytes"] = total["bytes"].get<size_t>() + docs[i].text.size();
    if (!tokens.empty()) {
      entry["tokens"] = tokens[i].size();
      total["tokens"] = total.value("tokens", size_t{0}) + tokens[i].size();
    }
    documents.push_back(std::move(entry));
    jsonl[splits[i]] += corpus_jsonl_line(docs[i]);
  }
  nlohmann::json manifest = {{"format", "sinklm-corpus"}, {"format_version", 1}, {"seed", seed},
                             {"fractions", {{"validation", fractions.validation}, {"test", fractions.test}}},
                             {"sources", sources}, {"splits", split_totals}, {"documents", documents}};
  if (!tokenizer_description.empty()) manifest["tokenizer"] = tokenizer_description;

  AtomicDirWriter writer(out_dir);
  for (Split s : all_splits()) write_file_durable(writer.staging_path(std::string(split_name(s)) + ".jsonl"), jsonl[s]);
  write_file_durable(writer.staging_path("manifest.json"), manifest.dump(1) + "\n");
  writer.commit();
  size_t total_bytes = 0;
  for (const auto& d : docs) total_bytes += d.text.size();
  std::cout << "corpus: " << docs.size() << " documents, " << total_bytes / 1e6 << " MB -> " << out_dir << "\n";
  for (Split s : all_splits()) std::cout << "  " << split_name(s) << ": " << split_totals[split_name(s)].dump() << "\n";
  return 0;
}

}  // namespace sinklm
