// sinklm prepare sentencepiece: train a small BPE vocabulary on the training split of a corpus directory.
#include <filesystem>
#include <iostream>

#include "core/config/args.h"
#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "data/corpus/corpus_files.h"
#include "cli/prepare/prepare_steps.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"

namespace sinklm {

int prepare_sentencepiece(const std::vector<std::string>& argv) {
  std::string in_dir, out_dir;
  SentencePieceTrainingOptions options;
  Args args("prepare sentencepiece", "--in CORPUS_DIR --out DIR [--vocab-size N] [--seed N] [--threads N]",
            {flag(&in_dir, "in", "DIR", "corpus directory from `sinklm prepare corpus` (its train split is used)"),
             flag(&out_dir, "out", "DIR", "directory to write tokenizer.model and tokenizer.vocab into (replaced atomically)"),
             flag(&options.vocab_size, "vocab-size", "N", "vocabulary size", Range{2, 1 << 24}),
             flag(&options.max_sentences, "max-sentences", "N", "lines sampled for training", Range{1, 1e12}),
             flag(&options.seed, "seed", "N", "sampling seed", Range{0, 1e15}),
             flag(&options.threads, "threads", "N", "training threads (0 = all)", Range{0, 4096})},
            argv);
  if (args.print_help_if_requested()) return 0;
  args.require("in");
  args.require("out");
  AtomicDirWriter writer(out_dir);
  // SentencePiece reads sentences, one per line: the training documents' lines.
  std::string lines;
  for (const CorpusDocument& doc : read_corpus_split(in_dir, Split::Train)) lines += doc.text;
  const std::string input = writer.staging_path("training-lines.txt");
  write_file_durable(input, lines);
  options.input_files = {input};
  options.model_prefix = writer.staging_path("tokenizer");
  train_sentencepiece_bpe(options);
  std::filesystem::remove(input);
  writer.commit();
  SentencePieceTokenizer trained(out_dir + "/tokenizer.model");
  std::cout << "trained " << trained.description() << "\n";
  return 0;
}

}  // namespace sinklm
