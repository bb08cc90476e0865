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
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "data/tokenizers/bpe/added_tokens.h"
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

// The tokenizer files a checkpoint carries: the run's own and their Hugging Face view, made once (a run writes
// many checkpoints; the conversion reads and checks the whole vocabulary).
struct CheckpointTokenizer {
  std::vector<std::string> files;      // tokenizer_files(); empty for a byte-level model
  std::optional<HfTokenizerFiles> hf;  // none: Hugging Face cannot express the tokenizer (or there is none)
};
// Required: a tokenizer Hugging Face cannot express is a UserError naming it (export hf); Optional: it gets no view
// and a note on stderr (training, quantize: sinklm still reads the run's own file).
enum class HfView { Required, Optional };
CheckpointTokenizer checkpoint_tokenizer(std::vector<std::string> files, const Config& config, const ModelConfig& model,
                                         HfView view);
// Writes them into a checkpoint: the run's files under checkpoint_tokenizer_name(), tokenizer.json and
// tokenizer_config.json when there is a view.
void add_tokenizer_files(CheckpointWriter& writer, const CheckpointTokenizer& tokenizer);

}  // namespace sinklm
