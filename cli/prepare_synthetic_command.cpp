// sinklm prepare synthetic: a Bigram-Backcopy token stream (data/synthetic/bigram_backcopy.h) written as an ordinary
// shard directory (data/shards/shard_directory.h), so `sinklm train` reads it exactly as it reads text.
//
// Output directory:
//   train-00000.bin, validation-00000.bin, test-00000.bin   one document per split: that split's stream
//                                                            (independent streams from the same table),
//                                                            followed by the end-of-text id ('\n')
//   validation.txt, test.txt   the same streams as text (ids are bytes) for `sinklm stream` / `analyze`
//   manifest.json              the shard manifest, plus "synthetic": the options, symbols, triggers with
//                              what they copy, the bigram table, and per split the oracle's loss
//                              (nats/token) and the share of copied tokens
// The tokenizer is bytes (id = byte value; data/tokenizers/text_codec.h): train with data.tokenizer empty and
// model.tokenizer_vocab_size = 256 (configs/synthetic.yaml).
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/prepare_steps.h"
#include "core/args.h"
#include "core/atomic_dir.h"
#include "core/error.h"
#include "data/synthetic/bigram_backcopy.h"
#include "data/shards/shard_directory.h"

namespace sinklm {
namespace {

constexpr uint32_t kByteVocabulary = 256;
constexpr uint32_t kEndOfText = '\n';

int64_t get_count(const Args& args, const std::string& flag, int64_t fallback, int64_t minimum) {
  const int64_t value = args.get_int(flag, fallback);
  if (value < minimum) fail("--", flag, " ", value, ": must be at least ", minimum);
  return value;
}

}  // namespace

int prepare_synthetic(const std::vector<std::string>& argv) {
  Args args("prepare synthetic",
            "--out DIR [--seed N] [--rule backcopy|after-marker] [--symbols N] [--successors N] [--triggers N] [--trigger-rate P]",
            {{"out", "DIR", "shard directory to write (replaced atomically)"},
             {"rule", "NAME", "what a trigger copies: backcopy (the token j+1 before trigger j; default) or after-marker "
                              "(the token after the (j+1)-th most recent '@')"},
             {"marker-rate", "P", "after-marker: chance that '@' follows an ordinary symbol (default 0.1)"},
             {"marker-window", "N", "after-marker: a trigger only while its '@' is at most N back (default 32)"},
             {"seed", "N", "seed of the bigram table and the streams (default 1)"},
             {"symbols", "N", "ordinary symbols, letters then digits (default 48, at most 62)"},
             {"successors", "N", "possible next symbols per symbol, Zipf-weighted (default 6)"},
             {"triggers", "N", "trigger symbols; trigger j copies the token j+1 before it (default 2, at most 8)"},
             {"trigger-rate", "P", "chance that a trigger follows an ordinary symbol (default 0.15)"},
             {"train-tokens", "N", "training stream length (default 2000000)"},
             {"validation-tokens", "N", "validation stream length (default 100000)"},
             {"test-tokens", "N", "test stream length (default 100000)"}},
            argv);
  if (args.print_help_if_requested()) return 0;
  BigramBackcopyOptions options;
  options.seed = static_cast<uint64_t>(get_count(args, "seed", 1, 0));
  options.symbols = args.get_int("symbols", options.symbols);
  options.successors = args.get_int("successors", options.successors);
  options.triggers = args.get_int("triggers", options.triggers);
  options.trigger_rate = args.get_double("trigger-rate", options.trigger_rate);
  const std::string rule = args.get("rule", "backcopy");
  if (rule != "backcopy" && rule != "after-marker") fail("--rule ", rule, ": expected backcopy or after-marker");
  options.rule = rule == "backcopy" ? CopyRule::Backcopy : CopyRule::AfterMarker;
  options.marker_rate = args.get_double("marker-rate", options.marker_rate);
  options.marker_window = args.get_int("marker-window", options.marker_window);
  const BigramBackcopy source(options);
  const std::string out_dir = args.require("out");
  const std::pair<Split, int64_t> lengths[] = {{Split::Train, get_count(args, "train-tokens", 2000000, 2)},
                                               {Split::Validation, get_count(args, "validation-tokens", 100000, 2)},
                                               {Split::Test, get_count(args, "test-tokens", 100000, 2)}};

  AtomicDirWriter writer(out_dir);
  nlohmann::json splits = nlohmann::json::object(), documents = nlohmann::json::array(), oracle = nlohmann::json::object();
  uint64_t stream_seed = 0;
  for (const auto& [split, length] : lengths) {
    const SyntheticStream stream = source.generate(static_cast<uint64_t>(length), stream_seed++);
    const std::string shard = shard_file_name(split, 0, 0);
    write_token_shard(writer.staging_path(shard), {&stream.ids}, kByteVocabulary, kEndOfText);
    if (split != Split::Train)
      write_file_durable(writer.staging_path(std::string(split_name(split)) + ".txt"),
                         std::string(stream.ids.begin(), stream.ids.end()));
    splits[split_name(split)] = {{"shards", {shard}}, {"tokens", stream.ids.size() + 1}, {"documents", 1}};
    documents.push_back({{"id", std::string("synthetic-") + split_name(split)}, {"split", split_name(split)},
                         {"shard", shard}, {"tokens", stream.ids.size()}});
    oracle[split_name(split)] = {{"oracle_nll", stream.mean_nll()}, {"copy_fraction", stream.copy_fraction()}};
    std::cerr << "[prepare synthetic] " << split_name(split) << ": " << stream.ids.size() << " tokens, "
              << stream.copy_fraction() * 100 << "% copies, oracle loss " << stream.mean_nll() << " nats/token\n";
  }
  nlohmann::json table = nlohmann::json::object(), triggers = nlohmann::json::array();
  for (size_t i = 0; i < source.symbols().size(); ++i)
    for (const auto& [next, p] : source.successors(static_cast<int64_t>(i)))
      table[std::string(1, source.symbols()[i])][std::string(1, source.symbols()[next])] = p;
  for (size_t j = 0; j < source.triggers().size(); ++j)
    triggers.push_back({{"symbol", std::string(1, source.triggers()[j])},
                        {"copies", options.rule == CopyRule::Backcopy
                                       ? str("the token ", j + 1, " before it")
                                       : str("the token after the ", j + 1, ". most recent '@' (at most ",
                                             options.marker_window, " back)")}});
  nlohmann::json synthetic = {{"task", "bigram-backcopy (Guo et al. 2024, arXiv 2410.13835), no BOS"},
                              {"rule", rule},
                              {"seed", options.seed},
                              {"symbols", source.symbols()},
                              {"successors", options.successors},
                              {"trigger_rate", options.trigger_rate},
                              {"marker_rate", options.rule == CopyRule::AfterMarker ? options.marker_rate : 0.0},
                              {"triggers", triggers},
                              {"bigram", table},
                              {"splits", oracle}};
  nlohmann::json manifest = {{"format", "sinklm-shards"}, {"format_version", kTokenShardVersion},
                             {"tokenizer", "bytes (id = byte value)"}, {"vocab_size", kByteVocabulary},
                             {"end_of_text_id", kEndOfText}, {"bytes_per_token", token_bytes_for_vocab(kByteVocabulary)},
                             {"corpus", "synthetic"}, {"splits", splits}, {"documents", documents},
                             {"synthetic", synthetic}};
  write_file_durable(writer.staging_path("manifest.json"), manifest.dump(1) + "\n");
  writer.commit();
  std::cout << "synthetic shards: " << splits.dump() << " -> " << out_dir << "\n";
  return 0;
}

}  // namespace sinklm
