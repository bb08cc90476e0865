// The tokenizer files every checkpoint carries: the run's own (under checkpoint_tokenizer_name(), which sinklm
// reads) and the Hugging Face view of them, so that transformers' AutoTokenizer + AutoModelForCausalLM (and
// lm-eval's `hf` backend) load the directory alone and see exactly the ids sinklm sees:
//   tokenizer.json         data/tokenizers/hf_tokenizer_json.h, plus, for model.sink.mode token, each sink id as
//                          a special added token ("<|sink|>", or "<|sink_0|>", "<|sink_1|>", ... for several)
//                          and a TemplateProcessing post-processor that puts them before every text
//                          (single: sinks + $A; pair: sinks + $A + $B), as sinklm puts them before every sample,
//                          prompt and stream; other modes: no post-processor (sinklm adds nothing).
//   tokenizer_config.json  {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": the trained length
//                          (train.seq_len, sinks included), "bos_token" (the sink token for mode token, else the
//                          tokenizer's), "eos_token", "pad_token", "unk_token" (null: none),
//                          "clean_up_tokenization_spaces": false}
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "model/io/checkpoint.h"
#include "model/model_config.h"

namespace sinklm {

struct HfTokenizerFiles {
  nlohmann::json tokenizer;         // tokenizer.json
  nlohmann::json tokenizer_config;  // tokenizer_config.json
};
// `tokenizer_file`: the run's tokenizer (load_tokenizer's file). UserError naming it when Hugging Face cannot
// express it.
HfTokenizerFiles hf_tokenizer_files(const ModelConfig& model, int64_t trained_length, const std::string& tokenizer_file);

// Adds the run's tokenizer `files` (tokenizer_files()) and their Hugging Face view to a checkpoint. A tokenizer
// Hugging Face cannot express gets no view (a note on stderr, once per process); sinklm still reads it.
void add_tokenizer_files(CheckpointWriter& writer, const std::vector<std::string>& files, const Config& config,
                         const ModelConfig& model);

}  // namespace sinklm
