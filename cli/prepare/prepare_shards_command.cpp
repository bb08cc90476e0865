// sinklm prepare shards: documents (JSONL, JSONL.gz/.zst, text, corpus directories) -> a token shard directory
// (data/prepare/prepare_job.h), in parallel over the threads of each rank and over MPI ranks
// (`mpirun -np N sinklm prepare shards ...`). This file parses flags and runs the collectives.
#include <iostream>
#include <memory>
#include <thread>

#include "cli/prepare/prepare_steps.h"
#include "core/config/args.h"
#include "core/error.h"
#include "data/prepare/prepare_job.h"
#include "train/distributed/distributed_context.h"

namespace sinklm {
namespace {

constexpr double kCollectiveTimeoutS = 3600;

// Every flag of `prepare shards`, bound to what it sets. Sizes with units and fractions stay text until
// parse_options, inside the setup whose failure every rank reports the same way.
struct ShardFlags {
  ShardJobOptions job;
  std::string validation_size = "0.01", test_size = "0.01", shard_tokens = "100M", unit_bytes = "256M";
  std::string max_bad_fraction = "0.01";
  int threads = 0;  // this node's cores / ranks on the node
  int64_t progress_seconds = 10;
};

std::vector<FlagSpec> shard_flags(ShardFlags& f) {
  ShardJobOptions& o = f.job;
  return {flag(&o.tokenizer_path, "tokenizer", "PATH", "tokenizer.json, vocab.json (+ merges.txt), *.tiktoken or SentencePiece *.model"),
          flag(&o.inputs, "in", "PATH", "input (repeatable; more paths may follow): .jsonl, .jsonl.gz, .jsonl.zst, "
                                        ".txt(.gz/.zst) files, directories of them, glob patterns, or a `sinklm "
                                        "prepare corpus` directory"),
          flag(&o.out_dir, "out", "DIR", "shard directory to write (replaced atomically when the job is complete)"),
          flag(&o.text_field, "text-field", "NAME", "JSONL field holding the document text"),
          flag(&o.text_blocks, "text-blocks", ".txt: one document per blank-line-separated block (default: one per file)"),
          flag(&f.validation_size, "validation-size", "X", "validation split: a fraction of documents (0.01) or tokens (5M)"),
          flag(&f.test_size, "test-size", "X", "test split: a fraction of documents (0.01) or tokens (5M)"),
          flag(&o.seed, "seed", "N", "seed of the document hash that picks each document's split", Range{0, 1e15}),
          flag(&f.shard_tokens, "shard-tokens", "N", "start a new shard after about N tokens"),
          flag(&f.unit_bytes, "unit-bytes", "N", "work unit size on disk (compressed files count 4x): uncompressed JSONL "
                                                 "and text blocks are cut into ranges, smaller files grouped (shapes the output)"),
          flag(&f.max_bad_fraction, "max-bad-fraction", "F", "fail when more than this fraction of records is malformed"),
          flag(&f.threads, "threads", "N", "tokenizer threads per rank (0 = this node's cores / ranks on the node)", Range{0, 4096}),
          flag(&f.progress_seconds, "progress-seconds", "S", "seconds between progress lines (0: at every check)", Range{0, 86400}),
          flag(&o.kill_after_units, "fault-kill-after-units", "N", "testing: SIGKILL this process mid-unit once it has "
                                                                   "finished N units (-1: never)", Range{-1, 1e9})};
}

ShardJobOptions parse_options(const ShardFlags& f, const Args& args, const DistributedContext& context) {
  ShardJobOptions o = f.job;
  for (const std::string& extra : args.positionals()) o.inputs.push_back(extra);  // `--in data/*.zst` from a shell
  if (o.inputs.empty()) fail("missing --in PATH (files, directories or glob patterns of documents)");
  args.require("out");
  args.require("tokenizer");
  o.validation = SplitSize::parse(f.validation_size, "--validation-size");
  o.test = SplitSize::parse(f.test_size, "--test-size");
  o.shard_tokens = parse_count(f.shard_tokens, "--shard-tokens");
  o.unit_bytes = parse_count(f.unit_bytes, "--unit-bytes", /*binary=*/true);
  char* end = nullptr;
  o.max_bad_fraction = std::strtod(f.max_bad_fraction.c_str(), &end);
  if (*end != '\0' || !(o.max_bad_fraction >= 0 && o.max_bad_fraction <= 1))
    fail("--max-bad-fraction: '", f.max_bad_fraction, "' is not a fraction in [0, 1] (e.g. 0.01; 1 keeps going whatever the input)");
  o.threads = f.threads > 0 ? f.threads
                            : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / context.local_size());
  return o;
}

}  // namespace

int prepare_shards(const std::vector<std::string>& argv) {
  ShardFlags f;
  Args args("prepare shards",
            "--tokenizer PATH --in PATH [PATH...] --out DIR [options]\n"
            "       mpirun -np N sinklm prepare shards ...   (ranks share the work; same output)",
            shard_flags(f), argv);
  if (args.print_help_if_requested()) return 0;
  DistributedContext context("prepare shards");
  // Setting up (flags, inputs, tokenizer, plan) fails the same way on every rank, as a rule: one message, from
  // rank 0, unless only other ranks failed (a file a node cannot see).
  ShardJobOptions options;
  std::unique_ptr<ShardJob> job_holder;
  std::string failure;
  try {
    options = parse_options(f, args, context);
    job_holder = std::make_unique<ShardJob>(options, context.rank(), context.world_size());
  } catch (const UserError& e) {
    failure = e.what();
  }
  std::vector<double> failed = {failure.empty() ? 0.0 : 1.0, failure.empty() || !context.is_root() ? 0.0 : 1.0};
  context.allreduce_sum(failed, "prepare shards: setting up", kCollectiveTimeoutS);
  if (failed[0] > 0) {
    if (context.is_root() && !failure.empty()) fail(failure);
    if (!failure.empty() && failed[1] == 0) std::cerr << "sinklm prepare: error: rank " << context.rank() << ": " << failure << "\n";
    return 2;
  }
  ShardJob& job = *job_holder;
  const double progress_seconds = static_cast<double>(f.progress_seconds);
  int status = 0;  // rank 0's outcome, broadcast so that every rank ends the same way
  nlohmann::json summary;
  ProgressTotals totals;
  double seconds = 0;
  try {
    if (context.is_root()) {
      const size_t resumed = job.open_staging();
      std::cerr << "[prepare shards] " << job.file_count() << " file(s), " << human_bytes(job.total_disk_bytes()) << " in "
                << job.unit_count() << " unit(s) over " << context.world_size() << " rank(s) x " << options.threads
                << " thread(s); split fractions validation " << job.fractions().validation << ", test "
                << job.fractions().test << "\n";
      if (resumed > 0)
        std::cerr << "[prepare shards] resuming: " << resumed << " of " << job.unit_count()
                  << " unit(s) finished by an earlier run are kept\n";
    }
    context.barrier("prepare shards: staging directory", kCollectiveTimeoutS);

    PrepareCounters counters;
    ProgressMonitor monitor(
        counters, [&](std::vector<double>& sums) { context.allreduce_sum(sums, "prepare shards: progress", kCollectiveTimeoutS); },
        context.world_size(), static_cast<double>(job.total_disk_bytes()), options.max_bad_fraction, progress_seconds,
        context.is_root() ? &std::cerr : nullptr);
    bool completed = false;
    try {
      completed = job.run(counters, monitor.stop());
    } catch (const std::exception& e) {
      // The monitor is in collectives with the other ranks: end the whole job from here.
      if (context.world_size() > 1) context.abort_job(str("rank ", context.rank(), ": ", e.what()));
      throw;
    }
    totals = monitor.finish();
    seconds = monitor.seconds();
    if (!completed) {
      // Every rank saw the same sums, so every rank stops here.
      failure = str(static_cast<uint64_t>(totals.bad_lines), " of the first ", static_cast<uint64_t>(totals.records),
                    " records are malformed, more than --max-bad-fraction ", options.max_bad_fraction,
                    " allows; check --text-field and the inputs (finished units are kept: rerun with a higher "
                    "--max-bad-fraction to continue and list every bad line in bad_lines.tsv)");
      status = 2;
    } else if (context.is_root()) {
      try {
        summary = job.finish();
      } catch (const UserError& e) {
        failure = e.what();
        status = 2;
      }
    }
  } catch (const std::exception& e) {
    // One rank failing alone must not leave the others waiting in a collective.
    if (context.world_size() > 1) context.abort_job(str("rank ", context.rank(), ": ", e.what()));
    throw;
  }
  context.broadcast_bytes(&status, sizeof(status), 0);
  if (!context.is_root()) return status;
  if (status != 0) fail(failure);
  std::cout << "shards: " << summary.dump() << " -> " << options.out_dir << "\n";
  std::cout << "throughput: " << totals.input_bytes / 1e6 / seconds << " MB/s input, "
            << totals.tokens / seconds << " tokens/s, " << seconds << " s on " << context.world_size() << " rank(s) x "
            << options.threads << " thread(s)\n";
  return 0;
}

}  // namespace sinklm
