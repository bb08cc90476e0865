// sinklm prepare <corpus | shards | sentencepiece | synthetic>: the data pipeline, one step per subcommand.
#include "cli/command_steps.h"
#include "cli/commands.h"
#include "cli/prepare/prepare_steps.h"

namespace sinklm {

int run_prepare_command(const std::vector<std::string>& args) {
  static const std::vector<CommandStep> steps = {
      {"corpus", "English text from Debian packages -> train/validation/test JSONL + manifest", prepare_corpus},
      {"shards", "tokenize a corpus directory into binary token shards", prepare_shards},
      {"sentencepiece", "train a small SentencePiece BPE vocabulary on a corpus's training split", prepare_sentencepiece},
      {"synthetic", "a seeded Bigram-Backcopy token stream (attention sinks at CPU scale) -> token shards", prepare_synthetic},
  };
  return run_command_steps("prepare", steps, args);
}

}  // namespace sinklm
