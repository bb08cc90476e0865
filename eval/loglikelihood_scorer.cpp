#include "eval/loglikelihood_scorer.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace sinklm {
namespace {

// One request ready for the model: input ids (sinks, context, continuation without its last id) and the
// continuation ids that the last `targets.size()` input positions predict.
struct ModelInput {
  std::vector<int64_t> ids;
  std::vector<int64_t> targets;
};

ModelInput model_input(const TokenizedRequest& request, int64_t sink_count, int64_t max_length) {
  std::vector<int64_t> text(request.context.begin() + sink_count, request.context.end());
  text.insert(text.end(), request.continuation.begin(), request.continuation.end());
  text.pop_back();
  const int64_t room = max_length - sink_count;
  const int64_t n_targets = static_cast<int64_t>(request.continuation.size());
  if (n_targets > room)
    fail("a continuation of ", n_targets, " tokens does not fit the model's context of ", max_length, " positions");
  ModelInput input;
  input.ids.assign(request.context.begin(), request.context.begin() + sink_count);
  const int64_t keep = std::min<int64_t>(room, text.size());
  input.ids.insert(input.ids.end(), text.end() - keep, text.end());
  input.targets = request.continuation;
  return input;
}

}  // namespace

LoglikelihoodScorer::LoglikelihoodScorer(GPTNeoXForCausalLM model, const TextCodec& codec, int64_t batch_size)
    : model_(std::move(model)), codec_(codec), batch_size_(std::max<int64_t>(1, batch_size)) {}

TokenizedRequest LoglikelihoodScorer::tokenize(const LoglikelihoodRequest& request) const {
  const ModelConfig& config = model_->config();
  std::string context = request.context, continuation = request.continuation;
  size_t kept = context.find_last_not_of(" \t\n\r\f\v");
  kept = kept == std::string::npos ? 0 : kept + 1;
  continuation = context.substr(kept) + continuation;
  context.resize(kept);

  TokenizedRequest out;
  out.context = sink_prefix(config);
  if (context.empty()) {
    if (out.context.empty()) out.context.push_back(config.bos_token_id);  // lm-eval: score from a prefix token
    out.continuation = codec_.encode(continuation);
  } else {
    std::vector<int64_t> context_ids = codec_.encode(context);
    std::vector<int64_t> whole = codec_.encode(context + continuation);
    out.context.insert(out.context.end(), context_ids.begin(), context_ids.end());
    if (whole.size() > context_ids.size()) out.continuation.assign(whole.begin() + context_ids.size(), whole.end());
  }
  if (out.continuation.empty()) fail("continuation '", request.continuation, "' encodes to no tokens");
  return out;
}

std::vector<ContinuationScore> LoglikelihoodScorer::score(const std::vector<LoglikelihoodRequest>& requests) {
  const ModelConfig& config = model_->config();
  std::vector<ModelInput> inputs;
  inputs.reserve(requests.size());
  for (const auto& r : requests)
    inputs.push_back(model_input(tokenize(r), sink_prefix_length(config), config.max_position_embeddings));

  // Longest first, so each batch pads little; stable, so equal lengths keep request order.
  std::vector<size_t> order(inputs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return inputs[a].ids.size() > inputs[b].ids.size(); });

  c10::InferenceMode inference;
  const torch::Device device = model_->embed_out->weight.device();
  std::vector<ContinuationScore> scores(inputs.size());
  for (size_t start = 0; start < order.size(); start += batch_size_) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch_size_));
    const int64_t B = static_cast<int64_t>(end - start), T = static_cast<int64_t>(inputs[order[start]].ids.size());
    auto ids = torch::zeros({B, T}, torch::kInt64);  // right padding with id 0: never visible to real positions
    for (int64_t b = 0; b < B; ++b) {
      const auto& row = inputs[order[start + b]].ids;
      ids[b].narrow(0, 0, row.size()).copy_(torch::tensor(row, torch::kInt64));
    }
    auto hidden = model_->hidden_states(ids.to(device));  // [B, T, C]
    for (int64_t b = 0; b < B; ++b) {
      const ModelInput& input = inputs[order[start + b]];
      const int64_t n = static_cast<int64_t>(input.targets.size()), length = static_cast<int64_t>(input.ids.size());
      auto logits = model_->embed_out(hidden[b].narrow(0, length - n, n)).to(torch::kFloat32);  // [n, V]
      auto logprobs = torch::log_softmax(logits, -1).cpu();
      auto targets = torch::tensor(input.targets, torch::kInt64);
      ContinuationScore& s = scores[order[start + b]];
      s.logprob = logprobs.gather(1, targets.unsqueeze(1)).to(torch::kFloat64).sum().item<double>();
      s.greedy = logprobs.argmax(-1).equal(targets);
      s.tokens = n;
    }
  }
  return scores;
}

}  // namespace sinklm
