#include "eval/zero_shot/loglikelihood_scorer.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/progress_meter.h"

namespace sinklm {
namespace {

// One forward row: input ids (sinks, then the text before the last target) and the continuation ids that
// the last `targets.size()` input positions predict, for request number `request`.
struct ModelInput {
  std::vector<int64_t> ids;
  std::vector<int64_t> targets;
  size_t request = 0;
};

// Usually one row. A continuation longer than the model's positions (a long PIQA solution under a byte-level
// or small-context model) is cut into consecutive pieces that fit, each row holding the tokens right before
// its piece; the pieces' log-probs add up (see the header).
std::vector<ModelInput> model_inputs(const TokenizedRequest& request, size_t index, int64_t sink_count,
                                     int64_t max_length) {
  std::vector<int64_t> text(request.context.begin() + sink_count, request.context.end());
  const size_t first_target = text.size();
  text.insert(text.end(), request.continuation.begin(), request.continuation.end());
  const size_t room = static_cast<size_t>(max_length - sink_count);
  SINKLM_ASSERT(room >= 1, "no positions left after ", sink_count, " sink tokens");
  std::vector<ModelInput> rows;
  for (size_t begin = first_target; begin < text.size(); begin += room) {
    const size_t end = std::min(text.size(), begin + room);  // this row's targets: text[begin, end)
    const size_t keep = std::min(room, end - 1);             // inputs: up to `room` ids before text[end - 1]
    ModelInput row;
    row.ids.assign(request.context.begin(), request.context.begin() + sink_count);
    row.ids.insert(row.ids.end(), text.begin() + (end - 1 - keep), text.begin() + (end - 1));
    row.targets.assign(text.begin() + begin, text.begin() + end);
    row.request = index;
    rows.push_back(std::move(row));
  }
  return rows;
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
    if (out.context.empty()) out.context.push_back(config.start_of_text_id());  // lm-eval: score from a prefix token
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

std::vector<ContinuationScore> LoglikelihoodScorer::score(const std::vector<LoglikelihoodRequest>& requests,
                                                          const std::string& progress_label) {
  const ModelConfig& config = model_->config();
  std::vector<ModelInput> inputs;
  inputs.reserve(requests.size());
  std::vector<ContinuationScore> scores(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto rows = model_inputs(tokenize(requests[i]), i, sink_prefix_length(config), config.max_position_embeddings);
    scores[i].greedy = true;  // and-ed over the rows below
    scores[i].windows = static_cast<int64_t>(rows.size());
    for (auto& row : rows) inputs.push_back(std::move(row));
  }

  // Longest first, so each batch pads little; stable, so equal lengths keep request order.
  std::vector<size_t> order(inputs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return inputs[a].ids.size() > inputs[b].ids.size(); });

  c10::InferenceMode inference;
  const torch::Device device = model_->embed_out->weight.device();
  ProgressMeter progress(progress_label, order.size(), "rows");
  for (size_t start = 0; start < order.size(); start += batch_size_) {
    if (!progress_label.empty()) progress.update(start);
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
      ContinuationScore& s = scores[input.request];
      s.logprob += logprobs.gather(1, targets.unsqueeze(1)).to(torch::kFloat64).sum().item<double>();
      s.greedy = s.greedy && logprobs.argmax(-1).equal(targets);
      s.tokens += n;
    }
  }
  if (!progress_label.empty()) progress.finish();
  return scores;
}

}  // namespace sinklm
