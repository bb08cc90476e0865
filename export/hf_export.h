// `sinklm export hf`: a checkpoint as a directory transformers reads whole (AutoTokenizer +
// AutoModelForCausalLM, no sinklm code): config.json, generation_config.json, model.safetensors in float32 or
// bf16 (int8 projections dequantized: transformers has no such format), the tokenizer and its Hugging Face view
// (export/hf_tokenizer_files.h). It is a sinklm checkpoint too (manifest.json), so sinklm serves it unchanged.
// Only modes transformers computes the same way are exported (model/sink.h: loads_in_transformers): none and
// token; the others change attention and are refused, naming the mode.
#pragma once
#include <string>
#include <vector>

#include "model/io/checkpoint.h"

namespace sinklm {

// `tokenizer_files`: tokenizer_files() of the checkpoint's tokenizer, empty for a byte-level model (no
// tokenizer: transformers then loads the model alone). Writes `out` atomically.
void export_hf(LoadedModel& loaded, const std::vector<std::string>& tokenizer_files, const std::string& out,
               torch::ScalarType dtype);

}  // namespace sinklm
