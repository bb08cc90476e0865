// sinklm prepare sentencepiece: train a small BPE vocabulary on the training split of a corpus directory.
#include <filesystem>
#include <iostream>

#include "core/args.h"
#include "core/atomic_dir.h"
#include "core/error.h"
#include "data/corpus/corpus_files.h"
#include "cli/prepare_steps.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"

namespace sinklm {

int prepare_sentencepiece(const std::vector<std::string>& argv) {
  Args args("prepare sentencepiece", "--in CORPUS_DIR --out DIR [--vocab-size N] [--seed N] [--threads N]",
            {{"in", "DIR", "corpus directory from `sinklm prepare corpus` (its train split is used)"},
             {"out", "DIR", "directory to write tokenizer.model and tokenizer.vocab into (replaced atomically)"},
             {"vocab-size", "N", "vocabulary size (default 8192)"},
             {"max-sentences", "N", "lines sampled for training (default 2000000)"},
             {"seed", "N", "sampling seed (default 1234)"},
             {"threads", "N", "training threads (default 0 = all)"}},
            argv);
  if (args.print_help_if_requested()) return 0;
  const std::string in_dir = args.require("in"), out_dir = args.require("out");
  AtomicDirWriter writer(out_dir);
  // SentencePiece reads sentences, one per line: the training documents' lines.
  std::string lines;
  for (const CorpusDocument& doc : read_corpus_split(in_dir, Split::Train)) lines += doc.text;
  const std::string input = writer.staging_path("training-lines.txt");
  write_file_durable(input, lines);
  SentencePieceTrainingOptions options;
  options.input_files = {input};
  options.model_prefix = writer.staging_path("tokenizer");
  options.vocab_size = static_cast<int>(args.get_int("vocab-size", 8192));
  options.max_sentences = args.get_int("max-sentences", 2000000);
  options.seed = static_cast<uint64_t>(args.get_int("seed", 1234));
  options.threads = static_cast<int>(args.get_int("threads", 0));
  train_sentencepiece_bpe(options);
  std::filesystem::remove(input);
  writer.commit();
  SentencePieceTokenizer trained(out_dir + "/tokenizer.model");
  std::cout << "trained " << trained.description() << "\n";
  return 0;
}

}  // namespace sinklm
