#include "data/prepare/prepare_job.h"

#include <signal.h>

#include <filesystem>
#include <map>

#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "data/prepare/document_reader.h"
#include "data/prepare/document_record.h"
#include "data/prepare/prepare_unit.h"
#include "data/io/read_file.h"
#include "data/shards/shard_directory.h"
#include "data/shards/token_shard.h"
#include "data/tokenizers/tokenizer_files.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

constexpr size_t kSampleBytes = 4 << 20;

// Tokens (end-of-text ids included) per byte on disk of the first up to 4 MiB of documents of `file`.
double sample_tokens_per_disk_byte(const InputFile& file, const std::string& text_field, const Tokenizer& tokenizer,
                                   int threads) {
  DocumentReader reader(file, 0, file.disk_bytes);
  std::vector<std::string> texts;
  RawRecord raw;
  size_t bytes = 0;
  while (bytes < kSampleBytes && reader.next(raw)) {
    bytes += raw.text.size();
    DocumentRecord doc = decode_record(file, text_field, raw);
    if (doc.problem.empty() && !doc.text.empty()) texts.push_back(std::move(doc.text));
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());
  double tokens = 0;
  for (const TokenIds& ids : encode_documents(tokenizer, views, threads)) tokens += ids.size() + 1;
  // The disk bytes behind the records sampled: the reader has decompressed (and read from disk) a little more.
  const double produced = static_cast<double>(reader.bytes_read() + reader.bytes_buffered());
  const double disk = produced > 0 ? static_cast<double>(reader.disk_offset()) * reader.bytes_read() / produced : 0;
  return disk > 0 ? tokens / disk : 0;
}

std::string kind_key(const InputFile& f) {
  return str(input_kind_name(f.kind), "/", static_cast<int>(f.compression));
}

}  // namespace

ShardJob::ShardJob(ShardJobOptions options, int rank, int world_size)
    : options_(std::move(options)), rank_(rank), world_size_(world_size) {
  while (options_.out_dir.size() > 1 && options_.out_dir.back() == '/') options_.out_dir.pop_back();
  if (options_.out_dir.empty()) fail("--out: empty path");
  if (options_.shard_tokens < 1) fail("--shard-tokens must be positive");
  if (!(options_.max_bad_fraction >= 0 && options_.max_bad_fraction <= 1))
    fail("--max-bad-fraction: ", options_.max_bad_fraction, " is not in [0, 1]");
  files_ = expand_inputs(options_.inputs, InputOptions{options_.text_blocks});
  for (const InputFile& f : files_) total_disk_bytes_ += f.disk_bytes;
  units_ = plan_work_units(files_, options_.unit_bytes);
  tokenizer_files_ = tokenizer_files(options_.tokenizer_path, "--tokenizer");
  tokenizer_ = load_tokenizer(options_.tokenizer_path);
  tokenizer_sha256_ = tokenizer_sha256(tokenizer_files_);
  splitter_ = std::make_unique<HashSplitter>(options_.seed, resolve_fractions());
}

ShardJob::~ShardJob() = default;

SplitFractions ShardJob::resolve_fractions() {
  if (!options_.validation.is_tokens() && !options_.test.is_tokens())
    return SplitFractions{options_.validation.fraction, options_.test.fraction};
  // Token counts become fractions of an estimate of the corpus's tokens: file sizes on disk times the tokens
  // per disk byte of a sample from the first file of each kind (JSONL / text, each compression).
  std::map<std::string, double> rate;
  for (const InputFile& f : files_) {
    auto [it, fresh] = rate.try_emplace(kind_key(f), 0.0);
    if (fresh) it->second = sample_tokens_per_disk_byte(f, options_.text_field, *tokenizer_, options_.threads);
  }
  for (const InputFile& f : files_) estimated_tokens_ += rate[kind_key(f)] * static_cast<double>(f.disk_bytes);
  if (estimated_tokens_ < 1) fail("--in: the inputs hold no tokenizable document (cannot size the splits)");
  auto fraction = [&](const SplitSize& s) {
    return s.is_tokens() ? static_cast<double>(s.tokens) / estimated_tokens_ : s.fraction;
  };
  SplitFractions f{fraction(options_.validation), fraction(options_.test)};
  if (f.validation + f.test >= 1)
    fail("--validation-size ", options_.validation.to_string(), " and --test-size ", options_.test.to_string(),
         " take the whole corpus (about ", static_cast<uint64_t>(estimated_tokens_), " tokens, estimated); ask for less");
  return f;
}

nlohmann::json ShardJob::plan_json() const {
  nlohmann::json inputs = nlohmann::json::array();
  for (const InputFile& f : files_)
    inputs.push_back({{"path", f.path}, {"bytes", f.disk_bytes}, {"mtime_ns", f.mtime_ns}, {"kind", input_kind_name(f.kind)}});
  return {{"format", "sinklm-shards-plan"},
          {"version", 1},
          {"inputs", inputs},
          {"tokenizer_sha256", tokenizer_sha256_},
          {"text_field", options_.text_field},
          {"seed", options_.seed},
          {"split_fractions", {{"validation", fractions().validation}, {"test", fractions().test}}},
          {"shard_tokens", options_.shard_tokens},
          {"unit_bytes", options_.unit_bytes},
          {"units", units_.size()}};
}

std::string ShardJob::unit_record_path(size_t unit) const { return str(staging_dir(), "/units/", unit, ".json"); }

size_t ShardJob::open_staging() {
  const std::string plan_path = staging_dir() + "/plan.json", plan = plan_json().dump(1) + "\n";
  if (fs::exists(plan_path) && read_file(plan_path) == plan) {
    size_t done = 0;
    for (size_t u = 0; u < units_.size(); ++u) done += fs::exists(unit_record_path(u)) ? 1 : 0;
    return done;
  }
  fs::remove_all(staging_dir());
  fs::create_directories(staging_dir() + "/units");
  write_file_durable(plan_path, plan);
  fsync_directory(staging_dir());
  return 0;
}

bool ShardJob::run(PrepareCounters& counters, const std::atomic<bool>& stop) {
  UnitSettings settings;
  settings.text_field = options_.text_field;
  settings.shard_tokens = options_.shard_tokens;
  settings.threads = options_.threads;
  size_t finished = 0;
  UnitEnvironment env{files_, *tokenizer_, *splitter_, staging_dir(), counters, stop, nullptr};
  if (options_.kill_after_units >= 0)
    env.after_shard = [&] {
      if (finished >= static_cast<size_t>(options_.kill_after_units)) ::raise(SIGKILL);
    };
  for (size_t u : units_of_rank(units_, rank_, world_size_)) {
    const std::string record_path = unit_record_path(u);
    if (fs::exists(record_path)) {
      counters.disk_bytes += units_[u].disk_bytes;
      counters.skipped_disk_bytes += units_[u].disk_bytes;
      continue;
    }
    std::optional<nlohmann::json> record = process_unit(units_[u], settings, env);
    if (!record) return false;
    fsync_directory(staging_dir());  // the shards' renames are durable before the record says they exist
    write_file_durable(record_path + ".tmp", record->dump() + "\n");
    fs::rename(record_path + ".tmp", record_path);
    ++finished;
  }
  return true;
}

nlohmann::json ShardJob::finish() {
  std::vector<nlohmann::json> records;
  std::vector<std::vector<uint64_t>> piece_lines;
  for (size_t u = 0; u < units_.size(); ++u) {
    const std::string path = unit_record_path(u);
    if (!fs::exists(path)) fail(path, ": missing; a rank stopped before finishing unit ", u, " (rerun the same command)");
    records.push_back(nlohmann::json::parse(read_file(path)));
    piece_lines.push_back(records.back().at("piece_lines").get<std::vector<uint64_t>>());
  }
  const auto first_lines = first_lines_of_pieces(units_, piece_lines);

  nlohmann::json splits = nlohmann::json::object(), documents = nlohmann::json::array();
  for (Split s : all_splits())
    splits[split_name(s)] = {{"shards", nlohmann::json::array()}, {"tokens", 0}, {"documents", 0}};
  std::string bad_report = "# file:line\tproblem (records skipped by sinklm prepare shards)\n", first_bad;
  uint64_t bad = 0, empty = 0, docs = 0, input_bytes = 0;
  bool with_ids = false;
  for (size_t u = 0; u < units_.size(); ++u) {
    const nlohmann::json& r = records[u];
    for (Split s : all_splits()) {
      const nlohmann::json& part = r.at("splits").at(split_name(s));
      nlohmann::json& total = splits[split_name(s)];
      for (const auto& name : part.at("shards")) total["shards"].push_back(name);
      total["tokens"] = total["tokens"].get<uint64_t>() + part.at("tokens").get<uint64_t>();
      total["documents"] = total["documents"].get<uint64_t>() + part.at("documents").get<uint64_t>();
      docs += part.at("documents").get<uint64_t>();
    }
    for (const auto& b : r.at("bad_lines")) {
      const size_t piece = b.at(0).get<size_t>();
      const std::string where =
          str(files_[units_[u].pieces.at(piece).file].path, ":", first_lines[u][piece] + b.at(1).get<uint64_t>() - 1);
      bad_report += where + "\t" + b.at(2).get<std::string>() + "\n";
      if (first_bad.empty()) first_bad = where + ": " + b.at(2).get<std::string>();
      ++bad;
    }
    empty += r.at("empty_documents").get<uint64_t>();
    input_bytes += r.at("input_bytes").get<uint64_t>();
    if (r.contains("documents")) {
      with_ids = true;
      for (const auto& d : r["documents"])
        documents.push_back({{"id", d.at(0)}, {"split", d.at(1)}, {"shard", d.at(2)}, {"tokens", d.at(3)}});
    }
  }
  write_file_durable(staging_dir() + "/bad_lines.tsv", bad_report);
  const uint64_t records_total = docs + bad + empty;
  if (bad > 0 && static_cast<double>(bad) > options_.max_bad_fraction * static_cast<double>(records_total))
    fail(bad, " of ", records_total, " records are malformed, more than --max-bad-fraction ", options_.max_bad_fraction,
         " allows; the first: ", first_bad, "; all of them: ", staging_dir(), "/bad_lines.tsv");

  nlohmann::json inputs = nlohmann::json::array();
  for (const InputFile& f : files_) inputs.push_back(f.path);
  const uint32_t vocab = tokenizer_->vocab_size();
  nlohmann::json fractions_json = {{"validation", fractions().validation}, {"test", fractions().test}};
  nlohmann::json copies = nlohmann::json::array();
  for (const auto& copy : copy_tokenizer_files(tokenizer_files_, staging_dir() + "/tokenizer"))
    copies.push_back("tokenizer/" + fs::path(copy).filename().string());
  nlohmann::json manifest = {{"format", "sinklm-shards"}, {"format_version", kTokenShardVersion},
                             {"tokenizer", tokenizer_->description()}, {"tokenizer_files", copies},
                             {"tokenizer_sha256", tokenizer_sha256_}, {"vocab_size", vocab},
                             {"end_of_text_id", tokenizer_->end_of_text_id()},
                             {"bytes_per_token", token_bytes_for_vocab(vocab)}, {"inputs", inputs},
                             {"seed", options_.seed}, {"split_fractions", fractions_json}, {"splits", splits}};
  if (with_ids) manifest["documents"] = documents;
  nlohmann::json split_totals = nlohmann::json::object();
  for (auto& [name, s] : splits.items())
    split_totals[name] = {{"documents", s["documents"]}, {"tokens", s["tokens"]}, {"shards", s["shards"].size()}};
  nlohmann::json summary = {{"inputs", {{"files", files_.size()}, {"disk_bytes", total_disk_bytes_},
                                        {"input_bytes", input_bytes}, {"units", units_.size()}}},
                            {"splits", split_totals},
                            {"split_fractions", fractions_json},
                            {"documents", docs},
                            {"bad_lines", bad},
                            {"empty_documents", empty},
                            {"bad_line_report", "bad_lines.tsv"}};
  if (estimated_tokens_ > 0) summary["estimated_tokens"] = static_cast<uint64_t>(estimated_tokens_);
  write_file_durable(staging_dir() + "/" + "manifest.json", manifest.dump(1) + "\n");
  write_file_durable(staging_dir() + "/summary.json", summary.dump(1) + "\n");
  fs::remove_all(staging_dir() + "/units");
  fs::remove(staging_dir() + "/plan.json");
  AtomicDirWriter writer(options_.out_dir, ".partial", AtomicDirWriter::Staging::Keep);
  writer.commit();
  return summary;
}

}  // namespace sinklm
