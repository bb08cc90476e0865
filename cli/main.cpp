// The `sinklm` program: one binary, one subcommand per job. Each subcommand is a file of cli/ (the tools
// layer above the libraries core/, data/, model/, decode/, eval/, train/, server/) and is listed here.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_memory.h"
#include "cli/commands.h"

namespace {

// Commands that run a model reuse the heap's pages between steps and chunks (core/host_memory.h).
enum class RunsModel { No, Yes };

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
  RunsModel runs_model = RunsModel::No;
};

const Subcommand kSubcommands[] = {
    {"config", "the configuration reference: every key, type, default and range (--markdown, --yaml)",
     sinklm::run_config_command},
    {"info", "describe a config or checkpoint: architecture, sink mode, parameters, memory",
     sinklm::run_info_command},
    {"init", "build a freshly initialised model from a config and save it as a checkpoint",
     sinklm::run_init_command, RunsModel::Yes},
    {"forward", "run a forward pass of a checkpoint on tokens or text; write logits, print loss",
     sinklm::run_forward_command, RunsModel::Yes},
    {"train", "pretrain a model, data parallel over MPI ranks (mpirun -np N sinklm train ...)",
     sinklm::run_train_command, RunsModel::Yes},
    {"tokenize", "text on stdin to token ids on stdout (or back with --decode)", sinklm::run_tokenize_command},
    {"prepare", "build the corpus, token shards or a SentencePiece vocabulary (prepare --help)",
     sinklm::run_prepare_command},
    {"stream", "streaming perplexity of a long text through a KV cache policy (--compare: Table 3)",
     sinklm::run_stream_command, RunsModel::Yes},
    {"serve", "OpenAI-compatible streaming HTTP server with sessions over sink+window KV caches",
     sinklm::run_serve_command, RunsModel::Yes},
    {"bench-decode", "decode latency and tokens/s of a cache policy (scripts/bench/bench_serve runs it)",
     sinklm::run_bench_decode_command, RunsModel::Yes},
    {"eval", "zero-shot benchmarks by log-likelihood (lm-eval semantics); build-tasks; --compare A B",
     sinklm::run_eval_command, RunsModel::Yes},
    {"analyze", "attention mass per layer and head on the sink and first tokens; heatmap PNGs",
     sinklm::run_analyze_command, RunsModel::Yes},
};

void print_usage() {
  std::printf("usage: sinklm <command> [options]   (sinklm <command> --help for details)\n\ncommands:\n");
  for (const auto& c : kSubcommands) std::printf("  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : kSubcommands) {
    if (std::strcmp(c.name, argv[1]) != 0) continue;
    try {
      if (c.runs_model == RunsModel::Yes) sinklm::keep_host_memory();
      return c.run(args);
    } catch (const sinklm::UserError& e) {
      std::fprintf(stderr, "sinklm %s: error: %s\n", c.name, e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sinklm %s: internal error: %s\n", c.name, e.what());
      return 70;
    }
  }
  std::fprintf(stderr, "sinklm: unknown command '%s'\n\n", argv[1]);
  print_usage();
  return 2;
}
