// A checkpoint and the text codec that goes with it, as `sinklm eval` and `sinklm analyze` load them.
// Tokenizer: --tokenizer PATH, else the checkpoint config's data.tokenizer (the training run's), else a
// tokenizer file in the checkpoint directory, else bytes (serve/text_codec.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/args.h"
#include "model/checkpoint.h"
#include "serve/text_codec.h"

namespace sinklm {

struct ModelUnderTest {
  std::string checkpoint;
  LoadedModel loaded;
  std::unique_ptr<TextCodec> codec;
};

// A command's own options after the ones that choose the model: --checkpoint, --tokenizer,
// --device (cpu | cuda | auto), --set KEY=VALUE.
std::vector<FlagSpec> with_model_flags(const std::vector<FlagSpec>& own);
// Loads what those options say; the model is put in eval mode.
ModelUnderTest load_model_under_test(const Args& args);

}  // namespace sinklm
