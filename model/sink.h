// What a sink mode means, in one place: one row per mode in a table (SinkModeSpec, sink_mode_table()): its
// name, description, parameters and their optimiser treatment, the column (or normaliser) it puts in every
// head (SinkColumn), its output gate, where its sink is measured, how many sink slots a streaming cache keeps
// for it, whether transformers loads it, and the statistics `analyze`, the training probe and the report add
// for it. Every caller (training samples, prompts, streams, eval requests, cache defaults, weight decay,
// checkpoints, probes, the config schema's choices, tests) asks this module instead of testing the mode
// itself; docs/ARCHITECTURE.md lists the files a new mode touches.
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
//   softpick  no column: softmax replaced by the rectified softmax of Zuhri et al. 2025 (arXiv 2504.20966),
//             p_ij = ReLU(exp(s_ij) - 1) / sum_j |exp(s_ij) - 1|: a row may give a key nothing and need not sum
//             to 1, so no token has to take the surplus (no sink by construction)
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

struct ModelConfig;

enum class SinkMode { None, Token, Softmax1, Logit, KeyValue, Gated, Softpick };

// Every mode, in the table's order (the schema's choices): the one list tests loop over.
const std::vector<SinkMode>& all_sink_modes();
// Parses one of model.sink.mode's choices (the table's names; the schema reads them from there).
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
// module (gpt_neox.layers.N.attention.NAME), not in a Hugging Face checkpoint. The model hands each one to
// the optimiser with its spec (GPTNeoXForCausalLMImpl::sink_parameters): by the tensor, never by its name.
enum class SinkInit { Zero, Normal };  // Normal: the model's small normal init, as the q/k/v projection
struct SinkParameterSpec {
  std::string name;
  std::vector<int64_t> shape;
  SinkInit init = SinkInit::Zero;
  bool weight_decay = false;   // a sink parameter sets where surplus attention goes, no feature: no decay
  double lr_multiplier = 1.0;  // its learning rate is train.lr times this
};
std::vector<SinkParameterSpec> sink_parameters(const ModelConfig& model);  // per layer, in registration order
// Parameters per layer the mode adds: its sink parameters and its output gate.
int64_t sink_parameter_count(const ModelConfig& model);

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
// reference softmax below, SDPA's folded form in model/attention/attention.cpp, the fused CPU kernel of
// model/kernels/packed_qkv_attention.cpp, the stream caches of decode/ and the decode kernel of model/kernels/):
//   c_i  = logit_h + q_i . key_h / sqrt(D)       (the key term only where `key` is defined; no rotary)
//   p_ij = exp(s_ij) / (exp(c_i) + sum_j exp(s_ij)),  out_i = sum_j p_ij v_j + p_i,sink value_h
// softmax1 is logit 0 (the zero sink: a zero key and value), the learned logit a learned logit_h; a column
// with a learned key and value fills `key` and `value`. A path that implements only the logit asserts
// has_key_value() is false (supports_key_value() says which do).
// A mode may instead replace the softmax itself (`normaliser`: softpick): the paths that form scores call it
// through softmax_with_sink; the fast paths, which fold softmax into SDPA or a fused kernel, run only where
// softmax() holds, and the reference path (model/attention/attention.cpp) serves the others.
using ScoreNormaliser = torch::Tensor (*)(const torch::Tensor& scores);  // [..., Tk] -> probabilities
struct SinkColumn {
  torch::Tensor logit;  // [H] or undefined: no column (vanilla, sink tokens)
  torch::Tensor key;    // [H, D] or undefined: the column's logit does not depend on the query
  torch::Tensor value;  // [H, D] or undefined: the column adds nothing to the output
  ScoreNormaliser normaliser = nullptr;  // null: softmax (with the column when present)

  bool present() const { return logit.defined(); }
  bool softmax() const { return normaliser == nullptr; }
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

// Where a model's sink sits, for measuring the attention it receives (`sinklm analyze`, training probes):
// on its sink tokens (token), in the extra column (softmax1, logit, kv), or, for a vanilla or gated model,
// wherever training put it: the first position is the only candidate every query sees.
enum class SinkSite { FirstPosition, Tokens, Column };
SinkSite sink_site(SinkMode mode);
const char* sink_site_name(SinkSite site);  // "position 0", "sink token", "sink column"
// probs: [..., Tq, Tk] attention probabilities with the sink column dropped (model/analysis/attention_probe.h), the
// sequence starting with sink_prefix(). Returns [..., Tq]: each query's mass on the sink.
torch::Tensor sink_attention_mass(const ModelConfig& model, const torch::Tensor& probs);

// softmax over the last dim of `scores` [..., H, Tq, Tk] with the column (absent: plain softmax), the column
// dropped afterwards; a column's normaliser instead of softmax where it has one. Masked entries are -inf. q [..., H, Tq, D] (rotated, as the scores were made) is needed
// only for a column with a key. Every attention path that forms scores itself (model/attention/attention.cpp's
// reference, decode/'s stream caches) calls this; the fast paths fold the same column into SDPA
// (model/attention/attention.cpp) or into their own normaliser (model/kernels/packed_qkv_attention.cpp), tested equal to it.
torch::Tensor softmax_with_sink(const torch::Tensor& scores, const SinkColumn& column, const torch::Tensor& q = {});
// The column's logit for each query, broadcastable against scores of rank `rank` ([..., H, 1, 1], or
// [..., H, Tq, 1] for a column with a key: b_h + q · key_h / sqrt(D), q [..., H, Tq, D] rotated as the scores' queries).
torch::Tensor sink_column_logits(const SinkColumn& column, int64_t rank, torch::ScalarType dtype,
                                 const torch::Tensor& q = {});
// What the column's value adds to the output: (1 - sum_j p_ij) value_h, [..., H, Tq, D] float32, from the
// probabilities softmax_with_sink returned; undefined when the column has no value.
torch::Tensor sink_value_output(const torch::Tensor& probs, const SinkColumn& column);

// Softpick (Zuhri et al. 2025) over the last dim, -inf entries masked (they take nothing and add nothing to
// the sum): ReLU(e^s - 1) / (sum |e^s - 1| + eps), computed as ReLU(e^(s-m) - e^-m) / (sum |e^(s-m) - e^-m| +
// eps e^-m) with m = max(0, max s), which is the same function without overflow. eps = 1e-6 as in the paper.
torch::Tensor softpick(const torch::Tensor& scores);

// One layer of a recorded forward (model/analysis/attention_probe.h), as a mode's statistics see it.
struct LayerObservation {
  torch::Tensor probabilities;  // [H, T, T] float64, the sink column dropped
  torch::Tensor gate;           // [T, width] float64 after the sigmoid (modes with an output gate), else undefined
  int64_t far = 0;              // queries far .. T-1 are those mass statistics average over
};

// A gate below this leaves a head (or element) under a tenth of its output: the head is dormant by gate.
constexpr double kDormantGate = 0.1;

// A per-head statistic a mode adds to `sinklm analyze` (heads.json, analysis.md), the training probe and the
// report: each is averaged over the analysed segments like the sink mass.
struct SinkStatistic {
  const char* name;         // its key in heads.json's heads, the probe's records and the report ("gate_mean")
  const char* column;       // its column heading in analysis.md ("mean gate")
  const char* description;  // one line for the report
  torch::Tensor (*per_head)(const LayerObservation& layer);  // [H] float64
};

// One row of the table: everything a mode means.
struct SinkModeSpec {
  SinkMode mode;
  const char* name;     // model.sink.mode's choice
  const char* summary;  // its part of that key's help ("zero sink")
  std::string (*describe)(const ModelConfig& model);  // one line for `sinklm info`
  // The learned tensors per layer (registration order) and how they make the layer's column or normaliser.
  std::vector<SinkParameterSpec> (*parameters)(const ModelConfig& model);
  SinkColumn (*column)(const ModelConfig& model, const std::vector<torch::Tensor>& parameters, const torch::Tensor& like);
  int64_t (*output_gate_width)(const ModelConfig& model);  // 0 = no gate on the attention output
  SinkSite site;                                          // where analyze and the probe measure its sink
  int64_t (*default_cache_sinks)(const ModelConfig& model);
  bool loads_in_transformers;
  std::vector<SinkStatistic> statistics;
};
// Every mode's row, in the schema's order.
const std::vector<SinkModeSpec>& sink_mode_table();
const SinkModeSpec& sink_mode_spec(SinkMode mode);

}  // namespace sinklm
