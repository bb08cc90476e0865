// sinklm stream: streaming perplexity of a checkpoint over a long text through one cache configuration, or
// (--compare) through the paper's Table 3 configurations 0+W, 1+(W-1), 2+(W-2), 4+(W-4); or (--recall DIR)
// the recall probe (eval/sinks/recall_probe.h) on the recall source that DIR's manifest describes.
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/config/args.h"
#include "core/error.h"
#include "model/io/checkpoint.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "cli/token_input.h"
#include "data/io/read_file.h"
#include "data/synthetic/fact_recall.h"
#include "data/tokenizers/text_codec.h"
#include "eval/sinks/recall_probe.h"
#include "eval/sinks/streaming_perplexity.h"

namespace sinklm {
namespace {

// --json FILE ("" = not asked for).
void write_json(const std::string& path, const nlohmann::json& value) {
  if (path.empty()) return;
  std::ofstream out(path);
  if (!out) fail("--json ", path, ": cannot write");
  out << value.dump(2) << "\n";
}

void write_nll(const std::string& path, const StreamingPerplexity& r) {
  std::ofstream out(path);
  if (!out) fail("--nll-out ", path, ": cannot write");
  out << "# index\tnll (natural log) of text token index+1 given the tokens before it, as the cache saw them"
         "\ttop1: the id that prediction ranked first\n";
  for (size_t i = 0; i < r.nll.size(); ++i) out << i << '\t' << r.nll[i] << '\t' << r.top1[i] << '\n';
}

// `item` as a decimal integer of at least `least`, or a UserError naming `what`.
int64_t parse_integer(const std::string& item, int64_t least, const std::string& what) {
  size_t used = 0;
  int64_t n = least - 1;
  try {
    n = std::stoll(item, &used);
  } catch (const std::exception&) {
  }
  if (used != item.size() || n < least) fail(what, ": '", item, "' is not an integer of at least ", least);
  return n;
}

// Every flag of `stream`, bound to what it sets.
struct StreamFlags {
  ModelFlags model;
  CacheFlags cache;
  TokenInputFlags input;
  std::string rotation = "relative", nll_out, json, recall;
  std::vector<int64_t> distances;  // empty: default_recall_distances(W)
  std::string recall_policies = "full,window,sink_window";
  bool compare = false;
  int64_t max_tokens = -1;  // all
  StreamingPerplexityOptions perplexity;
  RecallProbeOptions probe;
};

std::vector<FlagSpec> stream_flags(StreamFlags& f) {
  constexpr Range kCount{1, 1e12};
  return with_flags(
      {flag(&f.rotation, "rotation", "IMPL", "relative (fast) | literal (the reference, one token at a time)"),
       flag(&f.compare, "compare", "run 0+W, 1+(W-1), 2+(W-2), 4+(W-4) and print a table (Table 3 of the paper)"),
       flag(&f.max_tokens, "max-tokens", "N", "stream only the first N tokens of the text (-1: all)", Range{-1, 1e15}),
       flag(&f.perplexity.chunk, "chunk", "N", "prefill chunk", kCount),
       flag(&f.perplexity.segment, "segment", "N", "tokens per perplexity segment", kCount),
       flag(&f.nll_out, "nll-out", "FILE", "per-token NLL and top-1 id (--compare: FILE.<S>+<R>)"),
       flag(&f.json, "json", "FILE", "also write the JSON summary here"),
       flag(&f.recall, "recall", "DIR", "run the recall probe on the source `prepare synthetic --task recall` wrote to DIR "
                                        "(instead of --text): accuracy vs fact-to-query distance per cache policy"),
       flag(&f.distances, "distances", "LIST", "recall: fact-to-query distances, comma-separated (default: W/8 .. 4W)",
            Range{4, 1e12}),
       flag(&f.probe.pairs, "pairs", "N", "recall: facts and queries per distance", kCount),
       flag(&f.recall_policies, "recall-policies", "LIST", "recall: cache policies, the first the reference of "
                                                           "agreement (--window/--sinks/--positions apply); NAME:W "
                                                           "sets W, heads:FILE a head-policy file")},
      {token_input_flags(f.input, /*ids=*/true), model_flags(f.model), cache_flags(f.cache)});
}

// One item of --recall-policies: NAME, NAME:W (that policy with W entries) or heads:FILE (the head-aware cache
// with FILE's heads instead of --head-policy's; the label names the file, so several such files compare).
RecallPolicy recall_policy(const std::string& item, const CacheOptions& cache, const ModelConfig& model) {
  CacheOptions o = cache;
  const size_t colon = item.find(':');
  o.policy = item.substr(0, colon);
  const std::string value = colon == std::string::npos ? "" : item.substr(colon + 1);
  if (o.policy == "heads" && !value.empty()) o.head_roles = std::make_shared<HeadRoles>(read_head_roles(value, "--recall-policies heads:"));
  else if (!value.empty()) o.window = parse_integer(value, 1, "--recall-policies " + item);
  if (o.policy == "window") o.sinks = 0;
  if (o.policy == "recompute") o.kv_format = KvFormat::Fp32;  // it keeps no K/V to store in any other format
  if (o.policy != "heads") o.head_roles = nullptr, o.retrieval_window = kFollowModel;
  std::string label = recall_policy_label(o, model);
  if (o.policy == "heads" && !value.empty())
    label += str(" (", std::filesystem::path(value).stem().string(), ": ", o.head_roles->retrieval_heads(), " heads at R)");
  return {label, o};
}

int run_recall(const StreamFlags& f, CachedDecoder& decoder, const InferenceModel& m) {
  const std::string& checkpoint = m.checkpoint;
  const ModelConfig& model = decoder.config();
  if (model.tokenizer_vocab_size != 256)
    fail("--recall: the recall source's ids are bytes, but ", checkpoint, " has a tokenizer of ", model.tokenizer_vocab_size,
         " ids; train on the recall shards (configs/recall.yaml)");
  const FactRecall source = read_recall_source(f.recall, "--recall");
  const CacheOptions cache = cache_options(f.cache, m);
  const int64_t window = cache.window;
  RecallProbeOptions options = f.probe;
  options.distances = !f.distances.empty() ? f.distances : default_recall_distances(window);
  options.chunk = f.perplexity.chunk;
  std::vector<RecallPolicy> policies;
  std::stringstream names(f.recall_policies);
  // Each policy of the list resolves --sinks afresh (the full cache keeps none, sink_window the model's).
  CacheOptions each = cache;
  each.sinks = f.cache.sinks;
  for (std::string item; std::getline(names, item, ',');) policies.push_back(recall_policy(item, each, model));
  const std::vector<RecallCurve> curves = run_recall_probe(decoder, source, window, policies, options);
  nlohmann::json result = recall_probe_json(curves, source, window, options);
  result["checkpoint"] = checkpoint;
  result["sink_mode"] = sink_mode_name(model.sink_mode);
  write_json(f.json, result);
  std::cout << recall_probe_table(curves, source, window);
  return 0;
}

}  // namespace

int run_stream_command(const std::vector<std::string>& argv) {
  StreamFlags f;
  Args args("stream",
            "--checkpoint DIR (--text FILE | --ids FILE | --shards DIR | --recall DIR) [--cache sink_window] [--window W] [--sinks S] [--compare]",
            stream_flags(f), argv);
  if (args.print_help_if_requested()) return 0;
  if (f.input.count() + !f.recall.empty() != 1)
    fail("give exactly one of --text FILE, --ids FILE, --shards DIR or --recall DIR");
  if (f.rotation != "literal" && f.rotation != "relative") fail("--rotation ", f.rotation, ": expected relative or literal");
  InferenceModel m = open_inference_model(f.model, !f.input.text.empty() ? NeedsText::Yes : NeedsText::No);
  CachedDecoder decoder(m.loaded.model);
  if (args.has("recall")) return run_recall(f, decoder, m);
  const ModelConfig& model = decoder.config();

  const TokenInput input = read_token_input(f.input, model, m.codec.get(), f.max_tokens);
  const std::vector<int64_t>& ids = input.ids;

  StreamingPerplexityOptions options = f.perplexity;
  options.kv_trace_every = std::max<int64_t>(options.chunk, static_cast<int64_t>(ids.size()) / 64);  // ~64 points
  options.rotation = f.rotation == "literal" ? KeyRotation::Literal : KeyRotation::Relative;
  const CacheOptions cache = cache_options(f.cache, m);
  const PositionRule rule = cache.positions;
  std::vector<CacheOptions> runs;
  if (f.compare) {
    for (int64_t sinks : {0, 1, 2, 4}) {
      CacheOptions o = cache;
      o.policy = sinks == 0 && cache.policy == "sink_window" ? "window" : cache.policy;
      o.sinks = sinks;
      runs.push_back(o);
    }
  } else {
    runs.push_back(cache);
  }

  nlohmann::json results = nlohmann::json::array();
  for (const auto& o : runs) {
    auto policy = make_cache_policy(o, model, "--cache/--window/--sinks");
    const std::string label = policy->label();
    std::fprintf(stderr, "[stream] %s %s (positions: %s): %zu tokens\n", policy->name().c_str(), label.c_str(),
                 position_rule_name(rule), ids.size());
    nlohmann::json entry = {{"cache", policy->name()}, {"config", label}, {"sinks", policy->sinks()},
                            {"window", policy->budget()}, {"positions", position_rule_name(rule)},
                            {"kv_bytes_per_stream", kv_bytes_per_stream(*policy, model, static_cast<int64_t>(ids.size()))}};
    auto result = streaming_perplexity(decoder, std::move(policy), rule, ids, options);
    entry.update(result.summary(options.segment));
    if (!f.nll_out.empty()) write_nll(f.compare ? f.nll_out + "." + label : f.nll_out, result);
    results.push_back(entry);
  }
  nlohmann::json summary = {{"checkpoint", m.checkpoint},
                            {"sink_mode", sink_mode_name(model.sink_mode)},
                            {"default_cache_sinks", default_cache_sinks(model)},
                            {"source", input.source},
                            {"tokenizer", input.tokenizer},
                            {"text_tokens", ids.size()},
                            {"weights", weight_format_name(m.weights)},  // the format most projections hold
                            {"runs", results}};
  write_json(f.json, summary);
  if (f.compare) {
    std::printf("| model | %s |\n|---|", [&] {
      std::string header;
      for (const auto& r : results) header += (header.empty() ? "" : " | ") + r["config"].get<std::string>();
      return header;
    }().c_str());
    for (size_t i = 0; i < results.size(); ++i) std::printf("---|");
    std::printf("\n| %s (%s) |", m.checkpoint.c_str(), sink_mode_name(model.sink_mode));
    for (const auto& r : results) {
      if (r["ppl"].is_null()) std::printf(" - |");
      else std::printf(" %.2f |", r["ppl"].get<double>());
    }
    std::printf("\n");
  } else {
    std::cout << results[0].dump(2) << "\n";
  }
  return 0;
}

}  // namespace sinklm
