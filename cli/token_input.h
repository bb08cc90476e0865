// The token ids a measuring command reads (stream, analyze), from exactly one of
//   --text FILE    UTF-8 text, encoded with the model's tokenizer;
//   --ids FILE     whitespace-separated token ids;
//   --shards DIR   the test split of a `sinklm prepare shards` directory, read as training reads documents:
//                  the shards in manifest order, each document followed by the end-of-text id. This is the
//                  held-out text of a training run with the same separators the model learned from.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/args.h"
#include "data/tokenizers/text_codec.h"
#include "model/model_config.h"

namespace sinklm {

struct TokenInputFlags {
  std::string text, ids, shards;
  int count() const { return !text.empty() + !ids.empty() + !shards.empty(); }
};
// `ids`: whether the command offers --ids.
std::vector<FlagSpec> token_input_flags(TokenInputFlags& f, bool ids);

struct TokenInput {
  std::vector<int64_t> ids;
  std::string source;     // the flag and its value, e.g. "--shards runs/demo/shards (test split)"
  std::string tokenizer;  // the codec's description, or "token ids" when none encoded them
};

// The ids of whichever input is given (UserError naming the flag when it cannot be read, holds an id outside
// [0, model.tokenizer_vocab_size), or, for --shards, was made with another vocabulary size); at most
// `max_tokens` of them (-1: all). `codec` may be null unless --text is the input.
TokenInput read_token_input(const TokenInputFlags& f, const ModelConfig& model, const TextCodec* codec,
                            int64_t max_tokens = -1);

}  // namespace sinklm
