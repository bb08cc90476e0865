// The tokenizer keys of a GGUF file (tokenizer.ggml.*), as llama.cpp reads them, one entry per embedding row:
//   byte-level BPE (tokenizer.json, vocab.json + merges.txt, *.tiktoken): model "gpt2", pre "gpt-2" (GPT-2's
//     pattern), "llama-bpe" or "qwen2" (those files' Split patterns; another pattern is refused), tokens in
//     GPT-2's byte alphabet, merges "left right" in rank order;
//   SentencePiece BPE (*.model): model "llama", tokens (the pieces), scores, add_space_prefix (its dummy prefix);
//   both: token_type (1 normal, 2 unknown, 3 control, 5 unused, 6 byte), bos/eos/padding/unknown ids.
// Rows past the tokenizer: each sink token "<|sink|>" (control), then "[PAD<id>]" (unused) up to vocab_size.
// Model mode token: bos_token_id is the sink and add_bos_token true, so llama.cpp puts the sink before every
// prompt as sinklm does; otherwise add_bos_token false (sinklm prepends nothing).
#pragma once
#include <string>

#include "export/gguf_file.h"
#include "model/model_config.h"

namespace sinklm {

// UserError naming `tokenizer_file` when llama.cpp has no vocabulary of its kind, and when its ids are not the
// model's tokenizer_vocab_size (another tokenizer than the model's).
void add_gguf_vocabulary(GgufFile& file, const ModelConfig& model, const std::string& tokenizer_file);

}  // namespace sinklm
