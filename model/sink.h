// What a sink mode means, in one place: its name, description, parameters, the extra softmax column it puts
// in every head (SinkColumn), where its sink is measured and how many sink slots a streaming cache keeps for
// it. Every caller (training samples, prompts, streams, eval requests, cache defaults, weight decay,
// checkpoints, probes, tests) asks this module instead of testing the mode itself; docs/ARCHITECTURE.md lists
// the files a new mode touches.
//
//   none      vanilla softmax attention
//   token     `model.sink.count` learnable sink tokens: embedding rows right after the tokenizer's vocabulary,
//             prepended to every sample, prompt and stream (sink_prefix); never predicted, never sampled
//   softmax1  softmax off by one: one extra softmax column with logit 0 and value 0 (the zero sink)
//   logit     one learned logit per head and layer in that extra column (parameter `sink_logit`, [H])
//   kv        a learned key and value per head and layer in that column (`sink_key`, `sink_value`, [H, D]):
//             the explicit attention bias of Sun et al. 2024; softmax1 is its case key = value = 0
//   gated     no column: each head's output times a sigmoid gate of the layer's normalised input (Qiu et
//             al. 2025), `gate` [hidden] -> [H] (headwise) or [H * D] (elementwise), before `dense`
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

struct ModelConfig;

enum class SinkMode { None, Token, Softmax1, Logit, KeyValue, Gated };

// Every mode, in the schema's order: the one list tests loop over.
const std::vector<SinkMode>& all_sink_modes();
// Parses one of the schema's choices for model.sink.mode (the schema owns the list of names).
SinkMode parse_sink_mode(const std::string& name);
const char* sink_mode_name(SinkMode mode);
// One line for `sinklm info`: what the mode adds to the model.
std::string sink_mode_description(const ModelConfig& model);

// The ids put in front of every training sample, prompt, stream and eval context: the sink tokens
// (mode token), else none. Their count is sink_prefix_length(); position sink_prefix_length() is the
// first real token.
std::vector<int64_t> sink_prefix(const ModelConfig& model);
int64_t sink_prefix_length(const ModelConfig& model);
// Prepends sink_prefix(model) to `ids`.
std::vector<int64_t> with_sink_prefix(const ModelConfig& model, const std::vector<int64_t>& ids);

// A learned tensor the mode adds to every attention layer, registered as `name` in the layer's attention
// module (gpt_neox.layers.N.attention.NAME): no weight decay, not in a Hugging Face checkpoint.
enum class SinkInit { Zero, Normal };  // Normal: the model's small normal init, as the q/k/v projection
struct SinkParameterSpec {
  std::string name;
  std::vector<int64_t> shape;
  SinkInit init = SinkInit::Zero;
};
std::vector<SinkParameterSpec> sink_parameters(const ModelConfig& model);  // per layer, in registration order
// Parameters per layer the mode adds: its sink parameters and its output gate.
int64_t sink_parameter_count(const ModelConfig& model);
// True for parameters that belong to the sink column (no weight decay; init as their spec says).
bool is_sink_parameter(const std::string& name);

// Width of the output gate (mode gated; 0 = none): the layer's `gate` projection maps the normalised input
// [B, T, hidden] to [B, T, width], width H (headwise) or H * D (elementwise). It is an ordinary linear layer
// (weight: small normal init and weight decay; bias: zero, so sigmoid starts near 0.5 as in Qiu et al.'s
// code, where the gate is extra columns of the query projection).
int64_t output_gate_width(const ModelConfig& model);
// attended [B, T, H * D] times gate [B, T, width] (sigmoid already applied), each gate over its head's D
// (headwise) or its element (elementwise).
torch::Tensor apply_output_gate(const torch::Tensor& attended, const torch::Tensor& gate, int64_t heads);

// Whether Hugging Face transformers' GPTNeoXForCausalLM loads the checkpoint and computes the same function
// (vanilla, sink tokens: ordinary embedding rows); the other modes change attention in a way it does not have.
bool loads_in_transformers(SinkMode mode);

// The extra softmax column a mode adds to every head, the one contract every attention path takes (the
// reference softmax below, SDPA's folded form in model/attention.cpp, the fused CPU kernel of
// model/packed_qkv_attention.cpp, the stream caches and decode kernels of serve/):
//   c_i  = logit_h + q_i . key_h / sqrt(D)       (the key term only where `key` is defined; no rotary)
//   p_ij = exp(s_ij) / (exp(c_i) + sum_j exp(s_ij)),  out_i = sum_j p_ij v_j + p_i,sink value_h
// softmax1 is logit 0 (the zero sink: a zero key and value), the learned logit a learned logit_h; a column
// with a learned key and value fills `key` and `value`. A path that implements only the logit asserts
// has_key_value() is false (supports_key_value() says which do).
struct SinkColumn {
  torch::Tensor logit;  // [H] or undefined: no column (vanilla, sink tokens)
  torch::Tensor key;    // [H, D] or undefined: the column's logit does not depend on the query
  torch::Tensor value;  // [H, D] or undefined: the column adds nothing to the output

  bool present() const { return logit.defined(); }
  bool has_key_value() const { return key.defined() || value.defined(); }
  int64_t heads() const { return logit.size(0); }
  // The same column in `dtype` (and on `device`); an absent column stays absent.
  SinkColumn to(torch::ScalarType dtype) const;
};
// A layer's column from its sink parameters (sink_parameters() order); `like` gives dtype and device of
// the constant columns (softmax1).
SinkColumn sink_column(const ModelConfig& model, const std::vector<torch::Tensor>& parameters,
                       const torch::Tensor& like);

// Sink slots a streaming cache keeps when the user does not say: exactly the model's sink tokens for a
// token model (it was trained with that many), else 4 (StreamingLLM's choice for vanilla models).
int64_t default_cache_sinks(const ModelConfig& model);

// Whether attention has the extra sink column (softmax1, logit, kv).
bool has_sink_column(SinkMode mode);

// Where a model's sink sits, for measuring the attention it receives (`sinklm analyze`, training probes):
// on its sink tokens (token), in the extra column (softmax1, logit, kv), or, for a vanilla or gated model,
// wherever training put it: the first position is the only candidate every query sees.
enum class SinkSite { FirstPosition, Tokens, Column };
SinkSite sink_site(SinkMode mode);
const char* sink_site_name(SinkSite site);  // "position 0", "sink token", "sink column"
// probs: [..., Tq, Tk] attention probabilities with the sink column dropped (model/attention_probe.h), the
// sequence starting with sink_prefix(). Returns [..., Tq]: each query's mass on the sink.
torch::Tensor sink_attention_mass(const ModelConfig& model, const torch::Tensor& probs);

// softmax over the last dim of `scores` [..., H, Tq, Tk] with the column (absent: plain softmax), the column
// dropped afterwards. Masked entries are -inf. q [..., H, Tq, D] (rotated, as the scores were made) is needed
// only for a column with a key. Every attention path that forms scores itself (model/attention.cpp's
// reference, serve/'s stream caches) calls this; the fast paths fold the same column into SDPA
// (model/attention.cpp) or into their own normaliser (model/packed_qkv_attention.cpp), tested equal to it.
torch::Tensor softmax_with_sink(const torch::Tensor& scores, const SinkColumn& column, const torch::Tensor& q = {});
// What the column's value adds to the output: (1 - sum_j p_ij) value_h, [..., H, Tq, D] float32, from the
// probabilities softmax_with_sink returned; undefined when the column has no value.
torch::Tensor sink_value_output(const torch::Tensor& probs, const SinkColumn& column);

}  // namespace sinklm
