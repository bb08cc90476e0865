// The `sinklm` program: one binary, one subcommand per job. Each subcommand is a file of cli/ (the tools
// layer above the libraries core/, data/, model/, train/, serve/, eval/) and is listed here.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/error.h"
#include "cli/commands.h"

namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

const Subcommand kSubcommands[] = {
    {"info", "describe a config or checkpoint: architecture, sink mode, parameters, memory",
     sinklm::run_info_command},
    {"init", "build a freshly initialised model from a config and save it as a checkpoint",
     sinklm::run_init_command},
    {"forward", "run a forward pass of a checkpoint on tokens or text; write logits, print loss",
     sinklm::run_forward_command},
    {"train", "pretrain a model, data parallel over MPI ranks (mpirun -np N sinklm train ...)",
     sinklm::run_train_command},
    {"tokenize", "text on stdin to token ids on stdout (or back with --decode)", sinklm::run_tokenize_command},
    {"prepare", "build the corpus, token shards or a SentencePiece vocabulary (prepare --help)",
     sinklm::run_prepare_command},
    {"stream", "streaming perplexity of a long text through a KV cache policy (--compare: Table 3)",
     sinklm::run_stream_command},
    {"serve", "OpenAI-compatible streaming HTTP server with sessions over sink+window KV caches",
     sinklm::run_serve_command},
    {"bench-decode", "decode latency and tokens/s of a cache policy (scripts/bench_serve runs the matrix)",
     sinklm::run_bench_decode_command},
    {"eval", "zero-shot benchmarks by log-likelihood (lm-eval semantics); build-tasks; --compare A B",
     sinklm::run_eval_command},
    {"analyze", "attention mass per layer and head on the sink and first tokens; heatmap PNGs",
     sinklm::run_analyze_command},
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
