// What a sink mode means, in one place. A fifth mode is added here (enum, name, the functions below), in
// the schema's list (core/config_schema.cpp: model.sink.mode), and in model/gpt_neox.cpp if it brings a
// parameter; every caller (training samples, prompts, streams, eval requests, cache defaults, weight decay,
// checkpoints) asks this module instead of testing the mode itself.
//
//   none      vanilla softmax attention
//   token     `model.sink.count` learnable sink tokens: embedding rows right after the tokenizer's vocabulary,
//             prepended to every sample, prompt and stream (sink_prefix); never predicted, never sampled
//   softmax1  softmax off by one: one extra softmax column with logit 0 and value 0 (the zero sink)
//   logit     one learned logit per head and layer in that extra column (parameter `sink_logit`, [H])
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

struct ModelConfig;

enum class SinkMode { None, Token, Softmax1, Logit };

// Parses one of the schema's choices for model.sink.mode (the schema owns the list of names).
SinkMode parse_sink_mode(const std::string& name);
const char* sink_mode_name(SinkMode mode);

// The ids put in front of every training sample, prompt, stream and eval context: the sink tokens
// (mode token), else none. Their count is sink_prefix_length(); position sink_prefix_length() is the
// first real token.
std::vector<int64_t> sink_prefix(const ModelConfig& model);
int64_t sink_prefix_length(const ModelConfig& model);
// Prepends sink_prefix(model) to `ids`.
std::vector<int64_t> with_sink_prefix(const ModelConfig& model, const std::vector<int64_t>& ids);

// True for parameters that belong to the sink mechanism (no weight decay, zero init).
bool is_sink_parameter(const std::string& name);

// Sink slots a streaming cache keeps when the user does not say: exactly the model's sink tokens for a
// token model (it was trained with that many), else 4 (StreamingLLM's choice for vanilla models).
int64_t default_cache_sinks(const ModelConfig& model);

// Whether attention has the extra sink column (softmax1, logit).
bool has_sink_column(SinkMode mode);

// Where a model's sink sits, for measuring the attention it receives (`sinklm analyze`, training probes):
// on its sink tokens (token), in the extra column (softmax1, logit), or, for a vanilla model, wherever
// training put it: the first position is the only candidate every query sees.
enum class SinkSite { FirstPosition, Tokens, Column };
SinkSite sink_site(SinkMode mode);
const char* sink_site_name(SinkSite site);  // "position 0", "sink token", "sink logit"
// probs: [..., Tq, Tk] attention probabilities with the sink column dropped (model/attention_probe.h), the
// sequence starting with sink_prefix(). Returns [..., Tq]: each query's mass on the sink.
torch::Tensor sink_attention_mass(const ModelConfig& model, const torch::Tensor& probs);

// softmax over the last dim of `scores` [..., H, Tq, Tk] with one more column holding `sink_logit` [H]
// (undefined = no column: plain softmax), that column dropped afterwards: p_ij = exp(s_ij) / (exp(b_h) +
// sum_j exp(s_ij)). Masked entries are -inf. Every attention path (model/attention.cpp's reference,
// serve/'s stream caches) calls this; the fast paths fold the same column into SDPA (model/attention.cpp) or
// into their own normaliser (model/packed_qkv_attention.cpp), both tested equal to this.
torch::Tensor softmax_with_sink(const torch::Tensor& scores, const torch::Tensor& sink_logit);

}  // namespace sinklm
