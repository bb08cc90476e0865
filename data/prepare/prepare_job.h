// `sinklm prepare shards` as one rank of a job sees it (MPI-free: the command passes rank and world size and
// runs the barriers). Every rank builds the same plan (prepare_plan.h) from the same arguments.
//
// On disk, while the job runs (a shared filesystem when ranks span nodes):
//   <out>.partial/plan.json             the arguments and inputs (paths, sizes, mtimes, tokenizer sha256) the
//                                       shards were made from; a rerun with any difference starts afresh
//   <out>.partial/<split>-*.bin         shards (prepare_unit.h), each renamed into place once complete
//   <out>.partial/units/<unit>.json     a unit's record, written (atomically) after its shards: a rerun skips
//                                       every unit that has one, so SIGKILL + rerun = uninterrupted run
// Rank 0 then writes, and moves the directory to <out> with one rename (core/files/atomic_dir.h):
//   manifest.json    shard_directory.h, plus "inputs", "seed", "split_fractions" and, for corpus directory
//                    inputs, the per-document list
//   summary.json     totals: inputs, units, per split documents / tokens / shards, bad lines, empty documents
//   bad_lines.tsv    "<file>:<line>\t<problem>" for every skipped record, in input order
// Nothing in <out> depends on the number of ranks or threads.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/prepare/hash_split.h"
#include "data/prepare/input_files.h"
#include "data/prepare/prepare_plan.h"
#include "data/prepare/prepare_progress.h"
#include "data/tokenizers/tokenizer.h"

namespace sinklm {

struct ShardJobOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string tokenizer_path;
  std::string text_field = "text";
  bool text_blocks = false;
  uint64_t seed = 1234;
  SplitSize validation{0.01, 0}, test{0.01, 0};
  uint64_t shard_tokens = 100000000;
  uint64_t unit_bytes = 256ull << 20;
  double max_bad_fraction = 0.01;
  int threads = 1;
  int kill_after_units = -1;  // testing: SIGKILL this process after writing a shard once it has finished N units
};

class ShardJob {
 public:
  ShardJob(ShardJobOptions options, int rank, int world_size);
  ~ShardJob();

  uint64_t total_disk_bytes() const { return total_disk_bytes_; }
  size_t unit_count() const { return units_.size(); }
  size_t file_count() const { return files_.size(); }
  const SplitFractions& fractions() const { return splitter_->fractions(); }
  std::string staging_dir() const { return options_.out_dir + ".partial"; }

  // Rank 0, before any rank runs: creates the staging directory, or empties one left by a job with other
  // arguments. Returns the number of finished units found (0 on a fresh start).
  size_t open_staging();
  // This rank's units, skipping finished ones (their bytes count as skipped progress). False when `stop`
  // was raised before the rank was done.
  bool run(PrepareCounters& counters, const std::atomic<bool>& stop);
  // Rank 0, after every rank has run: the manifest, summary and bad-line report, then the commit. UserError
  // when the bad lines exceed --max-bad-fraction (the staging directory is kept). Returns the summary.
  nlohmann::json finish();

 private:
  nlohmann::json plan_json() const;
  std::string unit_record_path(size_t unit) const;
  SplitFractions resolve_fractions();

  ShardJobOptions options_;
  int rank_, world_size_;
  std::vector<InputFile> files_;
  std::vector<WorkUnit> units_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::string> tokenizer_files_;  // copied into <out>/tokenizer/ (tokenizer_files.h)
  std::string tokenizer_sha256_;
  std::unique_ptr<HashSplitter> splitter_;
  uint64_t total_disk_bytes_ = 0;
  double estimated_tokens_ = 0;  // > 0 when a split size was given in tokens
};

}  // namespace sinklm
