// POST /tokenize and POST /detokenize, as llama.cpp's server has them, with the served model's tokenizer:
//   /tokenize   {"content": text, "add_special": false, "with_pieces": false}
//               -> {"tokens": [id, ...]}, or with_pieces [{"id": id, "piece": name}, ...] (piece: the token's
//                  text, named as in logprobs when its bytes are not UTF-8: serve/api/token_names.h);
//                  add_special puts the model's sink token(s) first, as every stream starts (model/sink.h)
//   /detokenize {"tokens": [id, ...]} -> {"content": text}; an id outside the tokenizer's vocabulary is a 400
//               naming tokens[i]
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "data/tokenizers/text_codec.h"
#include "model/model_config.h"

namespace sinklm {

// The ids text may name, [0, this): the tokenizer's, within the model's real vocabulary (no sink, no padding).
// Client ids are checked against it: prompts, logit_bias, /detokenize.
int64_t text_vocabulary(const TextCodec& codec, const ModelConfig& model);

nlohmann::json tokenize_response(const std::string& body, const TextCodec& codec, const ModelConfig& model);
nlohmann::json detokenize_response(const std::string& body, const TextCodec& codec, const ModelConfig& model);

}  // namespace sinklm
