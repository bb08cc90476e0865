// sinklm prepare shards: a corpus directory (corpus_files.h) -> a shard directory (shard_directory.h).
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/args.h"
#include "core/atomic_dir.h"
#include "core/error.h"
#include "data/corpus_files.h"
#include "cli/prepare_steps.h"
#include "data/shard_directory.h"

namespace sinklm {

int prepare_shards(const std::vector<std::string>& argv) {
  Args args("prepare shards", "--tokenizer PATH --in CORPUS_DIR --out DIR [--shard-tokens N] [--threads N]",
            {{"tokenizer", "PATH", "tokenizer.json, vocab.json (+ merges.txt), *.tiktoken or SentencePiece *.model"},
             {"in", "DIR", "corpus directory from `sinklm prepare corpus`"},
             {"out", "DIR", "shard directory to write (replaced atomically)"},
             {"shard-tokens", "N", "start a new shard after about N tokens (default 100000000)"},
             {"threads", "N", "tokenizer threads (default 0 = all)"}},
            argv);
  if (args.print_help_if_requested()) return 0;
  auto tokenizer = load_tokenizer(args.require("tokenizer"));
  const std::string in_dir = args.require("in"), out_dir = args.require("out");
  const int64_t shard_tokens = args.get_int("shard-tokens", 100000000);
  if (shard_tokens < 1) fail("--shard-tokens must be positive");
  const int threads = static_cast<int>(args.get_int("threads", 0));
  const uint32_t vocab_size = tokenizer->vocab_size(), eot = tokenizer->end_of_text_id();

  AtomicDirWriter writer(out_dir);
  nlohmann::json splits = nlohmann::json::object(), documents = nlohmann::json::array();
  for (Split split : all_splits()) {
    std::vector<CorpusDocument> docs = read_corpus_split(in_dir, split);
    std::vector<std::string_view> texts;
    for (const auto& d : docs) texts.push_back(d.text);
    std::vector<TokenIds> ids = encode_documents(*tokenizer, texts, threads);
    nlohmann::json shard_names = nlohmann::json::array();
    uint64_t split_tokens = 0;
    std::vector<const TokenIds*> pending;
    uint64_t pending_tokens = 0;
    auto flush = [&] {
      if (pending.empty()) return;
      std::string name = shard_file_name(split, shard_names.size());
      write_token_shard(writer.staging_path(name), pending, vocab_size, eot);
      shard_names.push_back(name);
      pending.clear();
      pending_tokens = 0;
    };
    for (size_t i = 0; i < docs.size(); ++i) {
      pending.push_back(&ids[i]);
      pending_tokens += ids[i].size() + 1;
      split_tokens += ids[i].size() + 1;
      documents.push_back({{"id", docs[i].id}, {"split", split_name(split)},
                           {"shard", shard_file_name(split, shard_names.size())}, {"tokens", ids[i].size()}});
      if (pending_tokens >= static_cast<uint64_t>(shard_tokens)) flush();
    }
    flush();
    splits[split_name(split)] = {{"shards", shard_names}, {"tokens", split_tokens}, {"documents", docs.size()}};
    std::cerr << "[prepare shards] " << split_name(split) << ": " << docs.size() << " documents, " << split_tokens
              << " tokens in " << shard_names.size() << " shard(s)\n";
  }
  nlohmann::json manifest = {{"format", "sinklm-shards"}, {"format_version", kTokenShardVersion},
                             {"tokenizer", tokenizer->description()}, {"vocab_size", vocab_size},
                             {"end_of_text_id", eot}, {"bytes_per_token", token_bytes_for_vocab(vocab_size)},
                             {"corpus", in_dir}, {"splits", splits}, {"documents", documents}};
  write_file_durable(writer.staging_path("manifest.json"), manifest.dump(1) + "\n");
  writer.commit();
  std::cout << "shards: " << splits.dump() << " -> " << out_dir << "\n";
  return 0;
}

}  // namespace sinklm
