// Continued pretraining: a fresh model's weights taken from another checkpoint (train.init_from), a sinklm
// run or a Hugging Face GPT-NeoX directory, possibly of another sink mode. The architecture must be the same
// (hidden size, layers, heads, MLP width, rotary, norm, residual form, tokenizer vocabulary); what the target
// mode adds keeps its own initialisation, except that sink token rows start as the end-of-text row:
//
//   embed_in, embed_out   the overlapping rows are copied (the padded vocabularies may differ); a sink token's
//                         embed_in row (mode token, none in the source) is the source's end-of-text row, so the
//                         model on [sink, t1 .. tn] computes what the source computed on [eos, t1 .. tn], the
//                         document boundary it was trained on; its embed_out row is never predicted
//   every other tensor    copied by name, same shape
//   the mode's additions  sink_logit, sink_key, sink_value (zero or drawn as model/sink.h says), the gate
//                         projection (small normal weights, zero bias: each head's output starts halved)
//
// A source tensor the target has no place for (a sink parameter of another mode) is refused: what it learned
// would be dropped silently.
#pragma once
#include <string>
#include <vector>

#include "core/config/config.h"
#include "model/gpt_neox.h"

namespace sinklm {

struct InitFromReport {
  int64_t copied = 0;                // tensors copied whole
  std::vector<std::string> resized;  // embedding matrices whose overlapping rows were copied
  std::vector<std::string> fresh;    // the target mode's own parameters, left as initialised
  std::vector<int64_t> sink_rows_from_eos;  // sink token ids whose embed_in row is the end-of-text row
};

// Loads `dir` (verified like any checkpoint) and copies its weights into `model`, built from `config`
// (`config.source()` and `key` name the setting in errors).
InitFromReport init_from_checkpoint(const std::string& dir, const Config& config, GPTNeoXForCausalLM& model,
                                    const std::string& key = "train.init_from");

// One line for the trainer's log: what was copied and what starts fresh.
std::string describe(const InitFromReport& report);

}  // namespace sinklm
