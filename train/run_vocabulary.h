// The model.* keys that follow the run's tokenizer, resolved before the model is built: the tokenizer the
// shards were made with (data.shards' copy, or data.tokenizer), or, for byte-level shards without a tokenizer
// file, the vocabulary size and end-of-text id their manifest records.
//
//   model.tokenizer_vocab_size  -1: the tokenizer's size; a value below it is refused (its ids would not fit)
//   model.vocab_size            -1: tokenizer_vocab_size + the sink tokens, rounded up to 128 (ModelConfig)
//   model.eos_token_id          -1: the tokenizer's end-of-text (the id between documents in the shards)
//   model.bos_token_id          -1: its beginning-of-text, else its end-of-text (GPT-2's convention)
//   model.pad_token_id          -1: its padding token; stays -1 where it has none
// An id the config sets that is not the tokenizer's is refused, naming both: config.json, generation and
// every eval would otherwise disagree with the data the model was trained on.
#pragma once
#include <string>
#include <vector>

#include "core/config/config.h"

namespace sinklm {

// `config` with those keys resolved (every -1 the tokenizer answers replaced by its value, and
// model.vocab_size by the resolved size), so config.yaml, sinklm.yaml and config.json carry the real values.
// `tokenizer_files`: run_tokenizer_files(config) (train/training_checkpoint.h).
Config with_run_vocabulary(Config config, const std::vector<std::string>& tokenizer_files);

}  // namespace sinklm
