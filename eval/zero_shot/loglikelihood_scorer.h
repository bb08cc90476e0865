// Log-likelihood of continuations given contexts, as lm-evaluation-harness's HFLM computes it:
//  - tokenization: trailing whitespace of the context moves to the front of the continuation; the
//    continuation's ids are encode(context + continuation) minus the first len(encode(context)) ids;
//    an empty context becomes [bos] (ModelConfig::start_of_text_id: bos, else eos);
//  - a `token` sink model gets its sink id(s) in front of every context, as in training;
//  - input = (sinks + context + continuation)[:-1], cut from the left (after the sinks) to the model's
//    max_position_embeddings; logprob = sum of log-softmax of the continuation ids, greedy = every
//    continuation id is the argmax.
//  - a continuation with more ids than the positions left after the sinks (lm-eval mis-slices such a
//    request) is scored in consecutive pieces of that many ids, each conditioned on the ids right before it
//    (as many as fit after the sinks): its rolling-window log-likelihood. Requests that fit are unaffected.
// Requests are scored in batches sorted by length and right-padded: causal attention never lets a real
// position see the padding, so a request's score does not depend on the batch it lands in.
#pragma once
#include <cstdint>
#include <vector>

#include "eval/zero_shot/tasks/task_formats.h"
#include "model/gpt_neox.h"
#include "data/tokenizers/text_codec.h"

namespace sinklm {

struct ContinuationScore {
  double logprob = 0;  // summed natural-log probability of the continuation's tokens
  bool greedy = false;
  int64_t tokens = 0;  // continuation length in tokens
  int64_t windows = 1;  // > 1: the continuation did not fit the model's positions and was scored in pieces
};

struct TokenizedRequest {
  std::vector<int64_t> context;       // sink ids first for token-sink models
  std::vector<int64_t> continuation;  // non-empty
};

class LoglikelihoodScorer {
 public:
  LoglikelihoodScorer(GPTNeoXForCausalLM model, const TextCodec& codec, int64_t batch_size);

  TokenizedRequest tokenize(const LoglikelihoodRequest& request) const;
  // Scores in the order of `requests`; `progress_label` non-empty: a progress line (core/progress_meter.h)
  // counts the model rows scored.
  std::vector<ContinuationScore> score(const std::vector<LoglikelihoodRequest>& requests,
                                       const std::string& progress_label = "");

 private:
  GPTNeoXForCausalLM model_;
  const TextCodec& codec_;
  int64_t batch_size_;
};

}  // namespace sinklm
