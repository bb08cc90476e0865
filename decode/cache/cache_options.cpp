#include "decode/cache/cache_options.h"

#include "core/error.h"
#include "model/sink.h"

namespace sinklm {
namespace {

std::string past_trained(const std::string& what, int64_t positions, int64_t trained) {
  return str(what, " gives cache positions up to ", positions - 1, ", but the model was trained on ", trained,
             " positions (0..", trained - 1, "); what it predicts past them was never trained");
}

}  // namespace

CacheOptions resolve_cache_options(CacheOptions o, const ModelConfig& model, int64_t trained,
                                   const std::string& field, std::vector<std::string>* warnings) {
  const bool heads = o.policy == "heads";
  if (o.policy != "full" && o.policy != "window" && o.policy != "sink_window" && o.policy != "recompute" && !heads)
    fail(field, ": unknown cache policy '", o.policy, "'; expected full, window, sink_window, recompute or heads");
  if (o.window == kFollowModel) {
    if (trained == kFollowModel) fail(field, ": give the window (cache size)");
    o.window = trained;
  }
  if (o.window < 1) fail(field, ": the window (cache size) must be at least 1 (or -1: the model's trained length), got ", o.window);
  if (o.sinks < kFollowModel) fail(field, ": sinks must be at least 0 (or -1: the model's default), got ", o.sinks);
  if (o.sinks == kFollowModel)
    o.sinks = o.policy == "sink_window" || heads ? default_cache_sinks(model)
              : o.policy == "recompute"          ? sink_prefix_length(model)
                                                 : 0;
  // A retrieval window given with another cache is kept (stream --recall-policies lists heads caches beside
  // it) and refused only when that cache is built (make_cache_policy).
  if (heads && o.retrieval_window == kFollowModel) o.retrieval_window = 4 * o.window;
  if (o.retrieval_window != kFollowModel && o.retrieval_window <= o.window)
    fail(field, ": the retrieval window (", o.retrieval_window, ") must be larger than the window (", o.window,
         "), or -1 for 4 W");
  if (warnings && trained != kFollowModel) {
    if (o.window > trained) warnings->push_back(past_trained(str("--window ", o.window), o.window, trained));
    if (heads && o.retrieval_window > trained)
      warnings->push_back(past_trained(str("--retrieval-window ", o.retrieval_window), o.retrieval_window, trained));
    if (o.positions == PositionRule::Stream)
      warnings->push_back(str("--positions stream: positions pass the model's trained ", trained, " once a stream is longer"));
  }
  return o;
}

PositionRule parse_position_rule(const std::string& text, const std::string& field) {
  if (text == "cache") return PositionRule::Cache;
  if (text == "stream") return PositionRule::Stream;
  fail(field, ": unknown position rule '", text, "'; expected cache or stream");
}

const char* position_rule_name(PositionRule rule) { return rule == PositionRule::Cache ? "cache" : "stream"; }

}  // namespace sinklm
