// sinklm prepare synthetic: a synthetic token stream written as an ordinary shard directory
// (data/shards/shard_directory.h), so `sinklm train` reads it exactly as it reads text. Two tasks:
//   bigram-backcopy (default)  the Bigram-Backcopy stream (data/synthetic/bigram_backcopy.h) on which a sink forms
//   recall                     filler with planted facts and later queries (data/synthetic/fact_recall.h), the
//                              training source of the recall probe (`sinklm stream --recall DIR`)
//
// Output directory:
//   train-00000.bin, validation-00000.bin, test-00000.bin   per split one document, that split's stream
//                                                            (independent streams from the same table),
//                                                            followed by the end-of-text id ('\n'); with
//                                                            --document-tokens N the training split is packed
//                                                            documents of about N tokens, each followed by it
//                                                            (held-out splits stay one long document: the
//                                                            streaming test reads a book, as in the paper)
//   validation.txt, test.txt   the held-out streams as text (ids are bytes) for `sinklm stream` / `analyze`
//   manifest.json              the shard manifest, plus "synthetic": "task", the options, the symbols,
//                              the bigram table, and per split the oracle's loss (nats/token) and the
//                              task's own figures: bigram-backcopy the triggers with what they copy and the
//                              share of copied tokens; recall "recall" (the options the probe regenerates
//                              from, fact_recall.h) and per split the queries and their mean distance
// The tokenizer is bytes (id = byte value; data/tokenizers/text_codec.h): train with data.tokenizer empty and
// model.tokenizer_vocab_size = 256 (configs/synthetic.yaml).
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/prepare/prepare_steps.h"
#include "core/config/args.h"
#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "data/synthetic/bigram_backcopy.h"
#include "data/synthetic/fact_recall.h"
#include "data/shards/shard_directory.h"

namespace sinklm {
namespace {

constexpr uint32_t kByteVocabulary = 256;
constexpr uint32_t kEndOfText = '\n';

// Every flag of `prepare synthetic`, bound to what it sets: the task's options, and the flags both tasks
// share (seed, symbols, successors; -1: the task's own default) apart.
struct SyntheticFlags {
  std::string out, task = "bigram-backcopy", rule = "backcopy";
  uint64_t seed = 1;
  int64_t symbols = -1, successors = -1;
  BigramBackcopyOptions bigram;
  FactRecallOptions recall;
  int64_t document_tokens = 0;  // one stream
  int64_t train_tokens = 2000000, validation_tokens = 100000, test_tokens = 100000;
};

std::vector<FlagSpec> synthetic_flags(SyntheticFlags& f) {
  constexpr Range kTokens{2, 1e15}, kRate{0, 1};
  return {
      flag(&f.out, "out", "DIR", "shard directory to write (replaced atomically)"),
      flag(&f.task, "task", "NAME", "bigram-backcopy (the stream on which a sink forms) or recall (planted facts and "
                                    "later queries, for `sinklm stream --recall`)"),
      flag(&f.seed, "seed", "N", "seed of the bigram table and the streams", Range{0, 1e15}),
      flag(&f.symbols, "symbols", "N", "ordinary symbols, letters then digits (-1: 48, at most 62; recall: lowercase, "
                                       "24, at most 26)", Range{-1, 62}),
      flag(&f.successors, "successors", "N", "possible next symbols per symbol, Zipf-weighted (-1: 6)", Range{-1, 62}),
      flag(&f.rule, "rule", "NAME", "bigram-backcopy: what a trigger copies: backcopy (the token j+1 before trigger j) "
                                    "or after-marker (the token after the (j+1)-th most recent '@')"),
      flag(&f.bigram.marker_rate, "marker-rate", "P", "after-marker: chance that '@' follows an ordinary symbol", kRate),
      flag(&f.bigram.marker_window, "marker-window", "N", "after-marker: a trigger only while its '@' is at most N back",
           Range{1, 1e9}),
      flag(&f.bigram.triggers, "triggers", "N", "bigram-backcopy: trigger symbols; trigger j copies the token j+1 "
                                                "before it (at most 8)", Range{0, 8}),
      flag(&f.bigram.trigger_rate, "trigger-rate", "P", "bigram-backcopy: chance that a trigger follows an ordinary symbol",
           kRate),
      flag(&f.document_tokens, "document-tokens", "N", "bigram-backcopy: pack the training split as documents of "
                                                       "N/2..3N/2 tokens, each followed by the end-of-text id, as real "
                                                       "pretraining packs text (0: one stream)", Range{0, 1e15}),
      flag(&f.recall.order, "order", "N", "recall: the filler chain's order, 1 or 2 (2: a previous-token head pays off "
                                          "on filler, which lets the induction circuit of recall form)", Range{1, 2}),
      flag(&f.recall.keys, "keys", "N", "recall: fact keys, uppercase letters (at most 26)", Range{1, 26}),
      flag(&f.recall.fact_rate, "fact-rate", "P", "recall: chance that a fact '@ K v' follows a filler symbol", kRate),
      flag(&f.recall.min_distance, "min-distance", "N", "recall: fewest tokens from a fact's key to its query '? K v' "
                                                        "(drawn uniformly)", Range{1, 1e9}),
      flag(&f.recall.max_distance, "max-distance", "N", "recall: most (at least min + 6 x keys; below the training "
                                                        "length, so a sample holds both)", Range{1, 1e9}),
      flag(&f.train_tokens, "train-tokens", "N", "training stream length", kTokens),
      flag(&f.validation_tokens, "validation-tokens", "N", "validation stream length", kTokens),
      flag(&f.test_tokens, "test-tokens", "N", "test stream length", kTokens)};
}

// The flags both tasks share, into a task's options.
template <typename Options>
Options with_shared(Options options, const SyntheticFlags& f) {
  options.seed = f.seed;
  if (f.symbols >= 0) options.symbols = f.symbols;
  if (f.successors >= 0) options.successors = f.successors;
  return options;
}

// Writes each split's documents (shard, and for held-out splits the text file) and collects the manifest.
class SyntheticWriter {
 public:
  explicit SyntheticWriter(const std::string& out_dir) : out_dir_(out_dir), writer_(out_dir) {}

  // `figures`: the oracle's loss and the task's own, under synthetic.splits.<split> in the manifest.
  void add_split(Split split, const std::vector<const TokenIds*>& parts, nlohmann::json figures) {
    std::string text;  // the documents with the separator between them
    uint64_t tokens = 0;
    for (const TokenIds* part : parts) {
      if (!text.empty()) text += static_cast<char>(kEndOfText);
      text.append(part->begin(), part->end());
      tokens += part->size();
    }
    const std::string shard = shard_file_name(split, 0, 0);
    write_token_shard(writer_.staging_path(shard), parts, kByteVocabulary, kEndOfText);
    if (split != Split::Train) write_file_durable(writer_.staging_path(std::string(split_name(split)) + ".txt"), text);
    splits_[split_name(split)] = {{"shards", {shard}}, {"tokens", tokens + parts.size()}, {"documents", parts.size()}};
    documents_.push_back({{"id", std::string("synthetic-") + split_name(split)}, {"split", split_name(split)},
                          {"shard", shard}, {"tokens", tokens}, {"documents", parts.size()}});
    std::cerr << "[prepare synthetic] " << split_name(split) << ": " << tokens << " tokens in " << parts.size()
              << " document(s), " << figures.dump() << "\n";
    figures_[split_name(split)] = std::move(figures);
  }

  void commit(nlohmann::json synthetic) {
    synthetic["splits"] = figures_;
    nlohmann::json manifest = {{"format", "sinklm-shards"}, {"format_version", kTokenShardVersion},
                               {"tokenizer", "bytes (id = byte value)"}, {"vocab_size", kByteVocabulary},
                               {"end_of_text_id", kEndOfText}, {"bytes_per_token", token_bytes_for_vocab(kByteVocabulary)},
                               {"corpus", "synthetic"}, {"splits", splits_}, {"documents", documents_},
                               {"synthetic", synthetic}};
    write_file_durable(writer_.staging_path("manifest.json"), manifest.dump(1) + "\n");
    writer_.commit();
    std::cout << "synthetic shards: " << splits_.dump() << " -> " << out_dir_ << "\n";
  }

 private:
  std::string out_dir_;
  AtomicDirWriter writer_;
  nlohmann::json splits_ = nlohmann::json::object(), documents_ = nlohmann::json::array(),
                 figures_ = nlohmann::json::object();
};

nlohmann::json bigram_table(const BigramBackcopy& source) {
  nlohmann::json table = nlohmann::json::object();
  for (size_t i = 0; i < source.symbols().size(); ++i)
    for (const auto& [next, p] : source.successors(static_cast<int64_t>(i)))
      table[std::string(1, source.symbols()[i])][std::string(1, source.symbols()[next])] = p;
  return table;
}

using SplitLengths = std::vector<std::pair<Split, int64_t>>;

nlohmann::json write_bigram_backcopy(const SyntheticFlags& f, const SplitLengths& lengths, SyntheticWriter& out) {
  BigramBackcopyOptions options = with_shared(f.bigram, f);
  const std::string& rule = f.rule;
  if (rule != "backcopy" && rule != "after-marker") fail("--rule ", rule, ": expected backcopy or after-marker");
  options.rule = rule == "backcopy" ? CopyRule::Backcopy : CopyRule::AfterMarker;
  const int64_t document_tokens = f.document_tokens;
  const BigramBackcopy source(options);

  uint64_t stream_seed = 0;
  for (const auto& [split, length] : lengths) {
    const std::vector<SyntheticStream> parts =
        document_tokens == 0 || split != Split::Train
            ? std::vector<SyntheticStream>{source.generate(static_cast<uint64_t>(length), stream_seed)}
            : source.generate_documents(static_cast<uint64_t>(length), static_cast<uint64_t>(document_tokens), stream_seed);
    ++stream_seed;
    std::vector<const TokenIds*> ids;
    double nll = 0, copies = 0, tokens = 0;
    for (const SyntheticStream& part : parts) {
      ids.push_back(&part.ids);
      nll += part.mean_nll() * static_cast<double>(part.ids.size());
      copies += static_cast<double>(part.copies);
      tokens += static_cast<double>(part.ids.size());
    }
    out.add_split(split, ids, {{"oracle_nll", nll / tokens}, {"copy_fraction", copies / tokens}});
  }
  nlohmann::json triggers = nlohmann::json::array();
  for (size_t j = 0; j < source.triggers().size(); ++j)
    triggers.push_back({{"symbol", std::string(1, source.triggers()[j])},
                        {"copies", options.rule == CopyRule::Backcopy
                                       ? str("the token ", j + 1, " before it")
                                       : str("the token after the ", j + 1, ". most recent '@' (at most ",
                                             options.marker_window, " back)")}});
  return {{"task", "bigram-backcopy (Guo et al. 2024, arXiv 2410.13835), no BOS"},
          {"rule", rule},
          {"seed", options.seed},
          {"symbols", source.symbols()},
          {"successors", options.successors},
          {"trigger_rate", options.trigger_rate},
          {"marker_rate", options.rule == CopyRule::AfterMarker ? options.marker_rate : 0.0},
          {"triggers", triggers},
          {"document_tokens", document_tokens},
          {"bigram", bigram_table(source)}};
}

nlohmann::json write_recall(const SyntheticFlags& f, const SplitLengths& lengths, SyntheticWriter& out) {
  const FactRecallOptions options = with_shared(f.recall, f);
  const FactRecall source(options);
  uint64_t stream_seed = 0;
  for (const auto& [split, length] : lengths) {
    const RecallStream stream = source.generate(static_cast<uint64_t>(length), stream_seed++);
    double distance = 0;
    for (const RecallQuery& q : stream.queries) distance += static_cast<double>(q.distance);
    out.add_split(split, {&stream.ids},
                  {{"oracle_nll", stream.mean_nll()}, {"queries", stream.queries.size()},
                   {"mean_distance", stream.queries.empty() ? 0.0 : distance / static_cast<double>(stream.queries.size())}});
  }
  return {{"task", "recall"}, {"recall", recall_options_json(options)}, {"bigram", bigram_table(source.filler())}};
}

}  // namespace

int prepare_synthetic(const std::vector<std::string>& argv) {
  SyntheticFlags f;
  Args args("prepare synthetic",
            "--out DIR [--task bigram-backcopy|recall] [--seed N] [--symbols N] [--successors N] [task flags]",
            synthetic_flags(f), argv);
  if (args.print_help_if_requested()) return 0;
  const std::string& task = f.task;
  if (task != "bigram-backcopy" && task != "recall") fail("--task ", task, ": expected bigram-backcopy or recall");
  const std::vector<std::string> other_task_flags =
      task == "recall" ? std::vector<std::string>{"rule", "marker-rate", "marker-window", "triggers", "trigger-rate",
                                                  "document-tokens"}
                       : std::vector<std::string>{"order", "keys", "fact-rate", "min-distance", "max-distance"};
  for (const std::string& name : other_task_flags)
    if (args.has(name)) fail("--", name, " does not apply to --task ", task);
  const std::string out_dir = args.require("out");
  const SplitLengths lengths = {{Split::Train, f.train_tokens},
                                {Split::Validation, f.validation_tokens},
                                {Split::Test, f.test_tokens}};
  SyntheticWriter out(out_dir);
  nlohmann::json synthetic = task == "recall" ? write_recall(f, lengths, out) : write_bigram_backcopy(f, lengths, out);
  out.commit(std::move(synthetic));
  return 0;
}

}  // namespace sinklm
