// `sinklm export gguf`: a checkpoint as one GGUF v3 file (export/gguf_file.h) for llama.cpp's gptneox
// architecture:
//   general.architecture "gptneox", general.name, general.file_type (0 f32, 7 q8_0, 32 bf16),
//   general.quantization_version 2 (q8_0); gptneox.context_length (max_position_embeddings),
//   embedding_length, block_count, feed_forward_length, attention.head_count, attention.layer_norm_epsilon,
//   rope.dimension_count (the rotated dims of a head), rope.freq_base, use_parallel_residual;
//   the vocabulary (export/gguf_vocabulary.h).
// Tensors under llama.cpp's names: token_embd, blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up,
// ffn_down}, output_norm, output. attn_qkv is reordered from GPT-NeoX's per-head [H, 3, D] rows to [3, H, D]
// (all queries, then keys, then values), as llama.cpp's converter does. Norms and biases stay F32; each matrix
// is in the asked type (Q8_0 needs rows of whole blocks of 32; a matrix without is written F32).
// Only what llama.cpp computes the same way is exported: model.sink.mode none, or token with one sink token
// (it becomes the BOS llama.cpp prepends); the other modes change attention and are refused, naming the mode.
#pragma once
#include <string>

#include "export/gguf_file.h"
#include "model/io/checkpoint.h"

namespace sinklm {

// "f32", "bf16", "q8_0"; UserError naming `flag` otherwise.
GgufTensorType parse_gguf_type(const std::string& name, const std::string& flag);
const char* gguf_type_name(GgufTensorType type);

// Writes `out` atomically. `tokenizer_file`: the checkpoint's tokenizer (find_tokenizer_file). Returns the number
// of tensors written.
size_t export_gguf(const LoadedModel& loaded, const std::string& name, const std::string& tokenizer_file,
                   GgufTensorType type, const std::string& out);

}  // namespace sinklm
