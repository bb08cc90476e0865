// sinklm analyze: where attention goes (StreamingLLM, Figure 2 and the per-head view).
//
// The input (--text, or the test split of --shards: cli/token_input.h) is cut into up to --segments
// segments of --tokens positions (sink tokens of a `token` model first, as in training), consecutive or, with
// --spread, evenly spaced over the whole input. Per
// segment, every layer's attention probabilities (model/analysis/attention_probe.h) give, per head, averaged over
// queries q >= T/2 ("far from the start") and over segments:
//   sink_token       mass on the sink token(s)                          (token models)
//   first_positions  mass on each of the first k text positions
//   implicit_sink    mass absorbed by the sink column, 1 - sum of the row (softmax1 / logit / kv models)
//   statistics       each statistic the mode's row adds, by its name (model/sink.h: SinkModeSpec::statistics;
//                    gated: gate_mean, gate_dormant)
// With --classify-heads FILE it instead writes a head-policy file (decode/cache/head_roles.h) for `--cache heads`:
// per layer and head the attention mass beyond sinks + window W over the segments of the input or of a recall
// source's stream (--recall DIR), with a recall source also the recall each head loses when it alone keeps
// only W (eval/sinks/head_classification.h); the --retrieval-heads K heads of largest --score (recall-loss when
// there is a recall source, else attention-mass) become retrieval heads. The recall source's calibration
// streams use --calibration-seed and probe at --calibration-distances: give both values apart from those the
// heads are then scored on (`stream --recall`: seed 0, --distances), so what chose the heads never scores them.
// Output directory:
//   heads.json                  {"checkpoint", "sink_mode", ..., "segments", "segment_stride", "input_tokens",
//                               "layers": [{"layer", "heads": [{"head",
//                               "sink_token"?, "first_positions": [k], "implicit_sink"?, and each of the
//                               mode's statistics by name}]}], "statistics": [{"name", "column",
//                               "description"}], "mechanism": {"query_classes", "interventions",
//                               "per_segment" (per_segment_json)}, "maps": [{"layer", "file", "size",
//                               "range", "values": [M rows of M, null above the diagonal]}]}
//   analysis.md                 per layer: mean and largest head mass on the sink (token or logit; vanilla:
//                               position 0), and on position 0; a column per statistic of the mode
//   sink_mass.png               layers (rows) x heads (columns) heatmap of that sink mass, 0..1
//   attention_map_layer<L>.png  average over heads and segments of the first --map-tokens rows and columns
//                               of layer L's attention map, 0..max of rows 1.. (row 0 is always [1]; grey:
//                               masked, above the diagonal)
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "core/config/args.h"
#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "cli/token_input.h"
#include "data/synthetic/fact_recall.h"
#include "model/analysis/attention_mass.h"
#include "eval/sinks/head_classification.h"
#include "eval/figures/heatmap.h"
#include "eval/sinks/sink_interventions.h"
#include "decode/cached_decoder.h"

namespace sinklm {
namespace {

constexpr int kCellPixels = 24;

std::vector<int64_t> chosen_layers(const std::string& list, int64_t num_layers) {
  std::vector<int64_t> layers;
  if (list.empty()) {  // first, second, middle, last
    for (int64_t l : {int64_t{0}, int64_t{1}, num_layers / 2, num_layers - 1})
      if (l < num_layers && std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
    return layers;
  }
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    int64_t l = -1;
    try {
      l = std::stoll(item);
    } catch (...) {
    }
    if (l < 0 || l >= num_layers) fail("--layers: '", item, "' is not a layer index in [0, ", num_layers, ")");
    layers.push_back(l);
  }
  return layers;
}

// `segments` segments of `per_segment` ids starting every `stride` ids (>= per_segment), each with the model's
// sink prefix first.
std::vector<std::vector<int64_t>> cut_segments(const ModelConfig& c, const std::vector<int64_t>& ids, int64_t per_segment,
                                               int64_t segments, int64_t stride) {
  SINKLM_ASSERT(stride >= per_segment && (segments - 1) * stride + per_segment <= static_cast<int64_t>(ids.size()),
                "segments inside the input");
  std::vector<std::vector<int64_t>> out;
  for (int64_t s = 0; s < segments; ++s)
    out.push_back(with_sink_prefix(c, {ids.begin() + s * stride, ids.begin() + s * stride + per_segment}));
  return out;
}

// The calibration streams' default seed, apart from the recall probe's default (0).
constexpr int64_t kCalibrationSeed = 0xCA11B;

// Every flag of `analyze`, bound to what it sets; -1 / "": a default that follows the model or another flag.
struct AnalyzeFlags {
  ModelFlags model;
  TokenInputFlags input;
  CacheFlags cache;  // classify: --window, --sinks, --positions, --retrieval-window (cli/inference_model.h)
  std::string out, layers, classify_heads, recall, score, trigger_tokens, substitute = "\n";
  int64_t tokens = -1, segments = 8, first = 4, map_tokens = 16;
  bool spread = false;  // segments evenly spaced over the whole input instead of its first ones
  int64_t retrieval_heads = -1, pairs = RecallProbeOptions{}.pairs;
  std::vector<int64_t> calibration_distances;  // empty: W + (R - W)/4, /2, 3/4
  int64_t calibration_seed = kCalibrationSeed;
};

std::vector<FlagSpec> analyze_flags(AnalyzeFlags& f) {
  constexpr Range kCount{1, 1e12}, kOrDefault{-1, 1e12};
  return with_flags(
      {flag(&f.out, "out", "DIR", "output directory (heads.json, analysis.md, PNGs), replaced atomically"),
       flag(&f.tokens, "tokens", "N", "positions per segment, sinks included (-1: min(256, context))", kOrDefault),
       flag(&f.segments, "segments", "S", "segments averaged over", kCount),
       flag(&f.spread, "spread",
            "space the segments evenly over the whole input (every source of a mixed test split) instead of taking "
            "its first S x N tokens"),
       flag(&f.first, "first", "K", "first text positions reported per head", Range{0, 1e12}),
       flag(&f.layers, "layers", "LIST", "layers with an attention-map PNG (default 0,1,middle,last)"),
       flag(&f.map_tokens, "map-tokens", "M", "rows and columns of the attention-map PNGs", Range{0, 1e12}),
       flag(&f.classify_heads, "classify-heads", "FILE", "write a head-policy file for --cache heads instead (no --out)"),
       flag(&f.recall, "recall", "DIR", "classify: calibrate on a recall source's stream instead of --text/--shards"),
       flag(&f.trigger_tokens, "trigger-tokens", "CHARS",
            "queries at these characters' tokens (a synthetic source's triggers) reported apart from the others"),
       flag(&f.substitute, "substitute", "TEXT", "one token put in the sinks' place (default a newline, as Table 1)"),
       flag(&f.retrieval_heads, "retrieval-heads", "K", "classify: heads that keep the retrieval budget (-1: 1/4)", kOrDefault),
       flag(&f.score, "score", "NAME", "classify: recall-loss (default with --recall) | attention-mass (default otherwise)"),
       flag(&f.pairs, "pairs", "N", "classify, recall-loss: facts per probe distance", kCount),
       flag(&f.calibration_distances, "calibration-distances", "LIST",
            "classify, recall-loss: probe distances (default W + (R-W)/4, /2, 3/4); keep them apart from the "
            "distances the heads are then scored on", Range{4, 1e12}),
       flag(&f.calibration_seed, "calibration-seed", "N",
            "classify: seed of the calibration streams and probe (keep it apart from the scoring probe's)", Range{0, 1e15})},
      {token_input_flags(f.input, /*ids=*/false), model_flags(f.model), cache_flags(f.cache, CacheFlagSet::Sizes)});
}

void print_scores(const std::string& caption, const torch::Tensor& score, const HeadRoles& roles) {
  std::printf("%s; * = retrieval head\n\n| layer |", caption.c_str());
  for (int64_t h = 0; h < score.size(1); ++h) std::printf(" head %lld |", static_cast<long long>(h));
  std::printf("\n|---|");
  for (int64_t h = 0; h < score.size(1); ++h) std::printf("---|");
  for (int64_t l = 0; l < score.size(0); ++l) {
    std::printf("\n| %lld |", static_cast<long long>(l));
    for (int64_t h = 0; h < score.size(1); ++h)
      std::printf(" %.4f%s |", score[l][h].item<double>(), roles.is_retrieval(l, h) ? "*" : "");
  }
  std::printf("\n\n");
}

// The one id `text` encodes to; `flag` names the input in the error.
int64_t single_token(const std::string& text, const TextCodec& codec, const std::string& flag) {
  const std::vector<int64_t> ids = codec.encode(text);
  if (ids.size() != 1) fail(flag, " '", text, "': encodes to ", ids.size(), " tokens, not one");
  return ids[0];
}

// The token of --substitute; when the flag is not given and the tokenizer has no single newline token, -1
// (no substitution) with a note, so the default never fails a run.
int64_t substitute_token(const AnalyzeFlags& f, const Args& args, const TextCodec& codec) {
  if (args.has("substitute") || codec.encode(f.substitute).size() == 1) return single_token(f.substitute, codec, "--substitute");
  std::fprintf(stderr, "note: the tokenizer has no single newline token, so no substitution (give --substitute TEXT)\n");
  return -1;
}

// --trigger-tokens: per segment [T], true at the queries whose token is one of the characters' (empty: none).
std::vector<std::vector<bool>> trigger_queries(const std::vector<std::vector<int64_t>>& segments, const std::string& chars,
                                               const TextCodec& codec) {
  if (chars.empty()) return {};
  std::set<int64_t> ids;
  for (char ch : chars) ids.insert(single_token(std::string(1, ch), codec, "--trigger-tokens"));
  std::vector<std::vector<bool>> out;
  for (const auto& segment : segments) {
    out.emplace_back(segment.size());
    for (size_t q = 0; q < segment.size(); ++q) out.back()[q] = ids.count(segment[q]) > 0;
  }
  return out;
}

nlohmann::json loss_json(const InterventionLoss& loss) {
  return {{"all", loss.all}, {"trigger", loss.trigger}, {"other", loss.other}};  // NaN is written as null
}

// heads.json's "mechanism": the query classes and the interventions' losses (eval/sinks/sink_interventions.h).
nlohmann::json mechanism_json(const AttentionMass& stats, const SinkInterventions& r, const AnalyzeFlags& f) {
  nlohmann::json classes = nullptr;
  if (stats.sink_trigger.defined())
    classes = {{"trigger_tokens", f.trigger_tokens}, {"trigger_queries", stats.trigger_queries},
               {"other_queries", stats.other_queries}};
  return {{"query_classes", classes},
          {"interventions",
           {{"sinks", r.sinks}, {"substitute", {{"text", f.substitute}, {"id", r.substitute}}},
            {"targets", r.targets}, {"trigger_targets", r.trigger_targets},
            {"nll", {{"intact", loss_json(r.intact)}, {"evicted", loss_json(r.evicted)},
                     {"masked", loss_json(r.masked)}, {"substituted", loss_json(r.substituted)}}}}}};
}

// heads.json's "mechanism"."per_segment": the mechanism's figures of each segment alone, so that a report can put
// an interval over segments on one model (the pooled figures weight a segment by its queries; these weight
// segments equally):
//   sink_mass        [segments][L]  mean over heads of the mass on the sink (AttentionMass::sink)
//   sink_at_trigger, sink_at_other  [segments][L] the same per query class (null: no such query there)
//   masked, substituted  {"all", "trigger", "other"}: [segments] NLL added over intact (null: not defined)
nlohmann::json per_segment_json(GPTNeoXForCausalLM& model, const std::vector<std::vector<int64_t>>& cut,
                                const std::vector<std::vector<bool>>& trigger, int64_t first,
                                const SinkInterventions& interventions) {
  const auto layer_means = [](const torch::Tensor& per_head, bool defined) {  // [L, H] -> [L] (NaN: none)
    const torch::Tensor mean = per_head.mean(1).contiguous();
    std::vector<double> out(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel());
    if (!defined) std::fill(out.begin(), out.end(), std::nan(""));
    return out;
  };
  const auto added = [](const InterventionLoss& loss, const InterventionLoss& intact) {
    return nlohmann::json{{"all", loss.all - intact.all}, {"trigger", loss.trigger - intact.trigger},
                          {"other", loss.other - intact.other}};
  };
  nlohmann::json out = {{"sink_mass", nlohmann::json::array()}};
  nlohmann::json masked = {{"all", nlohmann::json::array()}, {"trigger", nlohmann::json::array()}, {"other", nlohmann::json::array()}};
  nlohmann::json substituted = masked;
  for (size_t s = 0; s < cut.size(); ++s) {
    const std::vector<std::vector<int64_t>> one = {cut[s]};
    std::vector<std::vector<bool>> classes;
    if (!trigger.empty()) classes.push_back(trigger[s]);
    const AttentionMass mass = measure_attention_mass(model, one, first, 0, classes);
    const InterventionLosses& r = interventions.per_segment[s];
    out["sink_mass"].push_back(layer_means(mass.sink, true));
    if (!classes.empty()) {
      out["sink_at_trigger"].push_back(layer_means(mass.sink_trigger, mass.trigger_queries > 0));
      out["sink_at_other"].push_back(layer_means(mass.sink_other, mass.other_queries > 0));
    }
    const nlohmann::json masked_cost = added(r.masked, r.intact), substituted_cost = added(r.substituted, r.intact);
    for (const char* part : {"all", "trigger", "other"}) {
      masked[part].push_back(masked_cost[part]);
      substituted[part].push_back(substituted_cost[part]);
    }
  }
  out["masked"] = masked, out["substituted"] = substituted;
  return out;
}

// analysis.md's mechanism table: each intervention's loss beside the intact one, per query class.
void mechanism_markdown(std::ostream& md, const SinkInterventions& r, bool classes) {
  md << "\nInterventions on " << (r.sinks ? str("positions 0..", r.sinks - 1) : std::string("the sink column")) << " (mean NLL of the same " << r.targets
     << " far targets; masked: no later query attends them; substituted: token " << r.substitute << " there)\n\n"
     << "| | all |" << (classes ? " at triggers | elsewhere |" : "") << "\n|---|---:|" << (classes ? "---:|---:|" : "")
     << "\n";
  const std::pair<const char*, const InterventionLoss*> rows[] = {
      {"intact", &r.intact}, {"evicted", &r.evicted}, {"masked", &r.masked}, {"substituted", &r.substituted}};
  char cell[64];
  for (const auto& [name, loss] : rows) {
    md << "| " << name << " |";
    for (double v : {loss->all, loss->trigger, loss->other}) {
      std::snprintf(cell, sizeof cell, " %.4f |", v);
      md << cell;
      if (!classes) break;
    }
    md << "\n";
  }
}

int classify_heads(const AnalyzeFlags& f, InferenceModel& m, int64_t T, int64_t max_segments) {
  const ModelConfig& c = m.loaded.model->config();
  const int64_t per_segment = T - sink_prefix_length(c);
  const bool recall = !f.recall.empty();
  HeadClassificationOptions options;
  CacheFlags flags = f.cache;
  flags.cache = "heads";  // streaming heads keep W, retrieval heads R
  options.cache = cache_options(flags, m);
  options.retrieval_heads = f.retrieval_heads;
  options.score = f.score;
  options.probe.distances = f.calibration_distances;
  options.probe.pairs = f.pairs;
  options.probe.seed = static_cast<uint64_t>(f.calibration_seed);
  if (f.input.count() + recall != 1) fail("give exactly one of --text FILE, --shards DIR or --recall DIR to calibrate on");

  std::vector<int64_t> ids;
  std::string source_name = f.recall;
  std::optional<FactRecall> source;
  if (recall) {
    source = read_recall_source(f.recall, "--recall");
    // A training-like stream of the source (queries at every distance), seeded apart from the probe's.
    const auto stream = source->generate(max_segments * per_segment, static_cast<uint64_t>(f.calibration_seed));
    ids.assign(stream.ids.begin(), stream.ids.end());
  } else {
    TokenInput input = read_token_input(f.input, c, m.codec.get(), max_segments * per_segment);
    ids = std::move(input.ids);
    source_name = input.source;
  }
  const int64_t segments = std::min<int64_t>(max_segments, static_cast<int64_t>(ids.size()) / per_segment);
  if (segments < 1) fail("the calibration text has ", ids.size(), " tokens, fewer than one segment of ", per_segment);
  CachedDecoder decoder(m.loaded.model);
  const HeadClassification result =
      classify_heads(decoder, cut_segments(c, ids, per_segment, segments, per_segment), source ? &*source : nullptr, options);
  const int64_t W = options.cache.window, S = options.cache.sinks, R = options.cache.retrieval_window;
  print_scores(str("Attention mass beyond ", S, " sinks + ", W - S, " recent (W = ", W, "), ", segments, " segments of ", T, " tokens"),
               result.mass, result.roles);
  if (result.loss.defined())
    print_scores(str("Recall lost when the head alone keeps ", S, "+", W - S, " instead of ", S, "+", R - S), result.loss,
                 result.roles);
  nlohmann::json file = head_classification_json(result);
  file["calibration"]["checkpoint"] = m.checkpoint;
  file["calibration"]["source"] = source_name;
  write_file_atomic(f.classify_heads, file.dump(2) + "\n");
  std::printf("wrote %s: %lld of %lld heads (largest %s) keep %lld entries, the others %lld\n",
              f.classify_heads.c_str(), static_cast<long long>(result.roles.retrieval_heads()),
              static_cast<long long>(c.num_layers * c.num_heads), result.score.c_str(), static_cast<long long>(R),
              static_cast<long long>(W));
  return 0;
}

}  // namespace

int run_analyze_command(const std::vector<std::string>& argv) {
  AnalyzeFlags f;
  Args args("analyze",
            "--checkpoint DIR (--text FILE | --shards DIR) --out DIR [--tokens N] [--segments S] [--first K] [--layers LIST]\n"
            "       sinklm analyze --checkpoint DIR (--text FILE | --shards DIR | --recall DIR) --classify-heads FILE --window W [--retrieval-heads K]",
            analyze_flags(f), argv);
  if (args.print_help_if_requested()) return 0;
  InferenceModel m = open_inference_model(f.model);
  const ModelConfig& c = m.loaded.model->config();
  const int64_t sinks = sink_prefix_length(c), L = c.num_layers, H = c.num_heads;
  const int64_t T = f.tokens >= 0 ? f.tokens : std::min<int64_t>(256, c.max_position_embeddings);
  const int64_t k = f.first, max_segments = f.segments;
  const int64_t M = std::min<int64_t>(f.map_tokens, T);
  if (T > c.max_position_embeddings || T < sinks + k + 2)
    fail("--tokens ", T, ": must be in [", sinks + k + 2, ", ", c.max_position_embeddings,
         "] (sinks + --first + 2 .. context)");
  if (!f.classify_heads.empty()) return classify_heads(f, m, T, max_segments);
  const std::vector<int64_t> map_layers = chosen_layers(f.layers, L);
  if (f.input.count() != 1) fail("give exactly one of --text FILE or --shards DIR to analyse");
  const int64_t per_segment = T - sinks;
  const TokenInput input = read_token_input(f.input, c, m.codec.get(), f.spread ? -1 : max_segments * per_segment);
  const std::vector<int64_t>& text = input.ids;
  const int64_t segments = std::min<int64_t>(max_segments, text.size() / per_segment);
  if (segments < 1)
    fail(input.source, ": ", text.size(), " tokens, fewer than one segment of ", per_segment,
         " (lower --tokens or give more text)");
  const int64_t stride = f.spread ? static_cast<int64_t>(text.size()) / segments : per_segment;

  const int64_t intervened = f.cache.sinks >= 0 ? f.cache.sinks : default_cache_sinks(c);
  if (intervened < 1 || intervened >= T / 2)
    fail("--sinks ", intervened, ": the interventions need 1 .. ", T / 2 - 1, " sink positions (before the far queries)");
  const auto cut = cut_segments(c, text, per_segment, segments, stride);
  const auto trigger = trigger_queries(cut, f.trigger_tokens, *m.codec);
  const AttentionMass stats = measure_attention_mass(m.loaded.model, cut, k, M, trigger);
  const int64_t substitute = substitute_token(f, args, *m.codec);
  const SinkInterventions interventions = intervene_on_sink(m.loaded.model, cut, intervened, substitute, trigger);
  const int64_t far = stats.far;
  const SinkSite site = sink_site(c.sink_mode);
  const bool explicit_sink = site == SinkSite::Tokens, implicit_sink = site == SinkSite::Column;
  // The mass a reader looks for first: on the sink token, on the sink logit, or (vanilla) on position 0.
  const torch::Tensor position0 = stats.first_positions.select(2, 0);  // [L, H]
  const torch::Tensor headline = stats.sink.to(torch::kFloat32).contiguous();
  const std::string headline_name = sink_site_name(site);
  const bool sink_is_not_text = explicit_sink || implicit_sink;

  nlohmann::json report = {{"checkpoint", m.checkpoint}, {"sink_mode", sink_mode_name(c.sink_mode)},
                           {"sink_count", sinks},        {"tokenizer", m.codec->description()},
                           {"text", input.source},   {"tokens_per_segment", T},
                           {"segments", segments},       {"segment_stride", stride},
                           {"input_tokens", text.size()}, {"first_k", k},
                           {"queries", {far, T}},        {"layers", nlohmann::json::array()}};
  report["sink_site"] = headline_name;
  report["statistics"] = nlohmann::json::array();
  for (const SinkStatistic& statistic : stats.statistic_specs)
    report["statistics"].push_back(
        {{"name", statistic.name}, {"column", statistic.column}, {"description", statistic.description}});
  std::ostringstream md;
  md << "Attention analysis of " << m.checkpoint << " (" << sink_mode_name(c.sink_mode) << " sink), " << segments
     << " segments of " << T << " positions"
     << (f.spread ? str(", one every ", stride, " of the input's ", text.size(), " tokens") : std::string(", the input's first"))
     << ", queries " << far << ".." << T - 1 << ".\n\n"
     << "| layer | mean mass on " << headline_name << " | largest head | head"
     << (sink_is_not_text ? " | mean mass on position 0" : "");
  for (const SinkStatistic& statistic : stats.statistic_specs) md << " | " << statistic.column;
  const bool classes = stats.sink_trigger.defined();
  md << " | value norm: sink / text" << (classes ? " | mass on " + headline_name + ": triggers / elsewhere" : "");
  md << " |\n|---:|---:|---:|---:|" << (sink_is_not_text ? "---:|" : "") << "---:|" << (classes ? "---:|" : "");
  for (size_t s = 0; s < stats.statistics.size(); ++s) md << "---:|";
  md << "\n";
  for (int64_t l = 0; l < L; ++l) {
    nlohmann::json heads = nlohmann::json::array();
    for (int64_t h = 0; h < H; ++h) {
      nlohmann::json head = {{"head", h}};
      if (explicit_sink) head["sink_token"] = stats.sink[l][h].item<double>();
      const torch::Tensor first = stats.first_positions[l][h].contiguous();
      head["first_positions"] = std::vector<double>(first.data_ptr<double>(), first.data_ptr<double>() + k);
      if (implicit_sink) head["implicit_sink"] = stats.sink[l][h].item<double>();
      for (size_t s = 0; s < stats.statistics.size(); ++s)
        head[stats.statistic_specs[s].name] = stats.statistics[s][l][h].item<double>();
      head["sink_value_norm"] = stats.sink_value_norm[l][h].item<double>();
      head["value_norm"] = stats.value_norm[l][h].item<double>();
      if (stats.sink_trigger.defined()) {
        head["sink_at_trigger"] = stats.sink_trigger[l][h].item<double>();
        head["sink_at_other"] = stats.sink_other[l][h].item<double>();
      }
      heads.push_back(head);
    }
    report["layers"].push_back({{"layer", l}, {"heads", heads}});
    char row[160];
    std::snprintf(row, sizeof row, "| %lld | %.3f | %.3f | %lld |", static_cast<long long>(l),
                  headline[l].mean().item<double>(), headline[l].max().item<double>(),
                  static_cast<long long>(headline[l].argmax().item<int64_t>()));
    md << row;
    if (sink_is_not_text) {
      std::snprintf(row, sizeof row, " %.3f |", position0[l].mean().item<double>());
      md << row;
    }
    for (const torch::Tensor& statistic : stats.statistics) {
      std::snprintf(row, sizeof row, " %.3f |", statistic[l].mean().item<double>());
      md << row;
    }
    std::snprintf(row, sizeof row, " %.3f / %.3f |", stats.sink_value_norm[l].mean().item<double>(),
                  stats.value_norm[l].mean().item<double>());
    md << row;
    if (classes) {
      std::snprintf(row, sizeof row, " %.3f / %.3f |", stats.sink_trigger[l].mean().item<double>(),
                    stats.sink_other[l].mean().item<double>());
      md << row;
    }
    md << "\n";
  }
  report["mechanism"] = mechanism_json(stats, interventions, f);
  report["mechanism"]["per_segment"] =
      per_segment_json(m.loaded.model, cut, trigger, k, interventions);
  mechanism_markdown(md, interventions, classes);

  AtomicDirWriter writer(args.require("out"));
  std::vector<float> sink_mass(headline.data_ptr<float>(), headline.data_ptr<float>() + L * H);
  write_png(writer.staging_path("sink_mass.png"), render_heatmap(sink_mass, L, H, 0.0, 1.0, kCellPixels));
  report["sink_mass_png"] = {{"file", "sink_mass.png"},
                             {"rows", "layers"},
                             {"columns", "heads"},
                             {"range", {0, 1}},
                             {"value", "mass on the " + headline_name}};
  md << "\nsink_mass.png: layers (rows, top = 0) x heads (columns), 0 (purple) .. 1 (yellow).\n";
  for (int64_t l : map_layers) {
    auto map = stats.maps[l].to(torch::kFloat32);
    map = map.masked_fill(torch::ones({M, M}, torch::kBool).triu(1), std::nanf(""));
    // Query 0 sees only key 0 (probability 1); the colour range follows the other rows, so row 0 saturates.
    const double high =
        std::max(1e-6, map.narrow(0, M > 1 ? 1 : 0, M > 1 ? M - 1 : 1).nan_to_num(0).max().item<double>());
    std::vector<float> values(map.data_ptr<float>(), map.data_ptr<float>() + M * M);
    const std::string file = str("attention_map_layer", l, ".png");
    write_png(writer.staging_path(file), render_heatmap(values, M, M, 0.0, high, kCellPixels));
    // The values too, so a plotting script can draw labelled axes and a colour bar (null above the diagonal).
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t q = 0; q < M; ++q) rows.push_back(std::vector<float>(values.begin() + q * M, values.begin() + (q + 1) * M));
    report["maps"].push_back({{"layer", l}, {"file", file}, {"size", M}, {"range", {0, high}}, {"values", rows}});
    md << "\n"
       << file << ": layer " << l << ", average over heads, queries (rows) x keys (columns) 0.." << M - 1 << ", 0 .. "
       << high << "\n";
  }
  write_file_durable(writer.staging_path("heads.json"), report.dump(2) + "\n");
  write_file_durable(writer.staging_path("analysis.md"), md.str());
  writer.commit();
  std::cout << md.str();
  return 0;
}

}  // namespace sinklm
