// sinklm prepare shards: documents (JSONL, JSONL.gz/.zst, text, corpus directories) -> a token shard directory
// (data/prepare/prepare_job.h), in parallel over the threads of each rank and over MPI ranks
// (`mpirun -np N sinklm prepare shards ...`). This file parses flags and runs the collectives.
#include <iostream>
#include <memory>
#include <thread>

#include "cli/prepare_steps.h"
#include "core/args.h"
#include "core/error.h"
#include "data/prepare/prepare_job.h"
#include "train/distributed_context.h"

namespace sinklm {
namespace {

constexpr double kCollectiveTimeoutS = 3600;

ShardJobOptions parse_options(const Args& args, const DistributedContext& context) {
  ShardJobOptions o;
  o.inputs = args.get_all("in");
  for (const std::string& extra : args.positionals()) o.inputs.push_back(extra);  // `--in data/*.zst` from a shell
  if (o.inputs.empty()) fail("missing --in PATH (files, directories or glob patterns of documents)");
  o.out_dir = args.require("out");
  o.tokenizer_path = args.require("tokenizer");
  o.text_field = args.get("text-field", "text");
  o.text_blocks = args.has("text-blocks");
  o.seed = static_cast<uint64_t>(args.get_int("seed", 1234));
  o.validation = SplitSize::parse(args.get("validation-size", "0.01"), "--validation-size");
  o.test = SplitSize::parse(args.get("test-size", "0.01"), "--test-size");
  o.shard_tokens = parse_count(args.get("shard-tokens", "100000000"), "--shard-tokens");
  o.unit_bytes = parse_count(args.get("unit-bytes", "256M"), "--unit-bytes", /*binary=*/true);
  const std::string bad = args.get("max-bad-fraction", "0.01");
  char* end = nullptr;
  o.max_bad_fraction = std::strtod(bad.c_str(), &end);
  if (*end != '\0' || !(o.max_bad_fraction >= 0 && o.max_bad_fraction <= 1))
    fail("--max-bad-fraction: '", bad, "' is not a fraction in [0, 1] (e.g. 0.01; 1 keeps going whatever the input)");
  const int threads = static_cast<int>(args.get_int("threads", 0));
  o.threads = threads > 0 ? threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / context.local_size());
  o.kill_after_units = static_cast<int>(args.get_int("fault-kill-after-units", -1));
  return o;
}

}  // namespace

int prepare_shards(const std::vector<std::string>& argv) {
  Args args("prepare shards",
            "--tokenizer PATH --in PATH [PATH...] --out DIR [options]\n"
            "       mpirun -np N sinklm prepare shards ...   (ranks share the work; same output)",
            {{"tokenizer", "PATH", "tokenizer.json, vocab.json (+ merges.txt), *.tiktoken or SentencePiece *.model"},
             {"in", "PATH", "input (repeatable; more paths may follow): .jsonl, .jsonl.gz, .jsonl.zst, .txt(.gz/.zst) "
                            "files, directories of them, glob patterns, or a `sinklm prepare corpus` directory"},
             {"out", "DIR", "shard directory to write (replaced atomically when the job is complete)"},
             {"text-field", "NAME", "JSONL field holding the document text (default text)"},
             {"text-blocks", "", ".txt: one document per blank-line-separated block (default: one per file)"},
             {"validation-size", "X", "validation split: a fraction of documents (0.01, default) or tokens (5M)"},
             {"test-size", "X", "test split: a fraction of documents (0.01, default) or tokens (5M)"},
             {"seed", "N", "seed of the document hash that picks each document's split (default 1234)"},
             {"shard-tokens", "N", "start a new shard after about N tokens (default 100M)"},
             {"unit-bytes", "N", "work unit size on disk (compressed files count 4x): uncompressed JSONL and text blocks "
                                 "are cut into ranges, smaller files grouped (default 256M; shapes the output)"},
             {"max-bad-fraction", "F", "fail when more than this fraction of records is malformed (default 0.01)"},
             {"threads", "N", "tokenizer threads per rank (default 0 = this node's cores / ranks on the node)"},
             {"progress-seconds", "S", "seconds between progress lines (default 10)"},
             {"fault-kill-after-units", "N", "testing: SIGKILL this process mid-unit once it has finished N units"}},
            argv);
  if (args.print_help_if_requested()) return 0;
  DistributedContext context("prepare shards");
  // Setting up (flags, inputs, tokenizer, plan) fails the same way on every rank, as a rule: one message, from
  // rank 0, unless only other ranks failed (a file a node cannot see).
  ShardJobOptions options;
  std::unique_ptr<ShardJob> job_holder;
  std::string failure;
  try {
    options = parse_options(args, context);
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
  const double progress_seconds = static_cast<double>(args.get_int("progress-seconds", 10));
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
