// sinklm prepare <corpus | shards | sentencepiece | synthetic>: the data pipeline, one step per subcommand.
#include <iomanip>
#include <iostream>

#include "core/config/args.h"
#include "core/error.h"
#include "core/config/text_distance.h"
#include "cli/commands.h"
#include "cli/prepare/prepare_steps.h"

namespace sinklm {

int run_prepare_command(const std::vector<std::string>& args) {
  struct Step {
    const char* name;
    const char* summary;
    int (*run)(const std::vector<std::string>&);
  };
  static const Step steps[] = {
      {"corpus", "English text from Debian packages -> train/validation/test JSONL + manifest", prepare_corpus},
      {"shards", "tokenize a corpus directory into binary token shards", prepare_shards},
      {"sentencepiece", "train a small SentencePiece BPE vocabulary on a corpus's training split", prepare_sentencepiece},
      {"synthetic", "a seeded Bigram-Backcopy token stream (attention sinks at CPU scale) -> token shards", prepare_synthetic},
  };
  std::vector<std::string> names;
  for (const auto& s : steps) names.push_back(s.name);
  if (!args.empty() && args[0] == kMarkdownHelp) {  // docs/cli.md: every step
    for (const auto& s : steps) {
      std::cout << "### sinklm prepare " << s.name << "\n\n" << s.summary << ".\n\n";
      s.run({kMarkdownHelp});
      std::cout << "\n";
    }
    return 0;
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: sinklm prepare <step> [options]   (sinklm prepare <step> --help)\n\nsteps:\n";
    for (const auto& s : steps) std::cout << "  " << std::left << std::setw(14) << s.name << s.summary << "\n";
    return args.empty() ? 2 : 0;
  }
  for (const auto& s : steps)
    if (args[0] == s.name) return s.run(std::vector<std::string>(args.begin() + 1, args.end()));
  fail("unknown step '", args[0], "'", did_you_mean(args[0], names), "; steps: corpus, shards, sentencepiece, synthetic");
}

}  // namespace sinklm
