// Opening a checkpoint for inference, the one way every command that runs a model does it (stream, serve,
// bench-decode, eval, analyze), and the flags that go with it.
//
// Tokenizer resolution, first match wins:
//   1. --tokenizer PATH;
//   2. a tokenizer file inside the checkpoint directory (tokenizer.json, vocab.json, tokenizer.model,
//      *.tiktoken): `sinklm train` copies the training tokenizer there;
//   3. the checkpoint config's data.tokenizer (the training run's path), when that file exists here;
//   4. bytes (id = byte value), when the model's tokenizer vocabulary has exactly 256 ids; a larger model
//      without a tokenizer is refused (its ids read as bytes would be gibberish) unless --tokenizer bytes.
#pragma once
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/config/args.h"
#include "data/tokenizers/text_codec.h"
#include "model/io/checkpoint.h"
#include "decode/cache/kv_cache_policy.h"

namespace sinklm {

// --checkpoint, --tokenizer, --device, --weights, --threads, --set: the flags of every command that runs a model.
struct ModelFlags {
  std::string checkpoint;  // required
  std::string tokenizer;   // "": the order above
  std::string device = "auto";  // CUDA when one is visible, else the CPU
  std::string weights = "auto";  // the projections' format (model/io/weight_format.h); auto: as each is stored
  int64_t threads = 0;  // 0: LibTorch's choice
  std::vector<std::string> set;
};
std::vector<FlagSpec> model_flags(ModelFlags& o);

// --cache, --window, --sinks, --positions, --kv-dtype, --head-policy, --retrieval-window.
struct CacheFlags {
  std::string cache = "sink_window";
  int64_t window = kFollowModel;  // every size: decode/cache/cache_options.h resolves kFollowModel
  int64_t sinks = kFollowModel;
  std::string positions = "cache";
  std::string kv_dtype = "auto";  // resolved by cache_options: the weights' dtype (bf16 or fp32)
  std::string head_policy;
  int64_t retrieval_window = kFollowModel;
};
// Every cache flag, or (CacheFlagSet::Sizes, for `analyze --classify-heads`) only --window, --sinks,
// --positions and --retrieval-window; help and defaults are the same in every command.
enum class CacheFlagSet { All, Sizes };
std::vector<FlagSpec> cache_flags(CacheFlags& o, CacheFlagSet set = CacheFlagSet::All);
// The options of --cache & co. for `model`, trained on `trained_positions` positions, its projections held
// mostly in `weights`, resolved (resolve_cache_options: the one place their defaults are), each warning about
// positions the model never saw printed on stderr. --kv-dtype auto is bf16 for bf16 weights and fp32 otherwise
// (int8 weights prefill in float32; int8 K/V changes quality, so it is asked for by name).
CacheOptions cache_options(const CacheFlags& o, const ModelConfig& model, int64_t trained_positions,
                           WeightFormat weights);

// The positions a model was trained on: train.seq_len of sinklm's checkpoints and configs, the position table
// (model.max_position_embeddings) of a Hugging Face directory, which records no training length.
int64_t trained_positions(const Config& config, const std::string& checkpoint_or_config);

// --set KEY=VALUE (repeatable) of the commands that build a model from a config (info, init, forward, train).
FlagSpec set_flag(std::vector<std::string>* overrides);

// `own` followed by the shared tables, e.g. with_flags(own, {model_flags(m), cache_flags(c)}).
std::vector<FlagSpec> with_flags(std::vector<FlagSpec> own, std::initializer_list<std::vector<FlagSpec>> shared);

struct InferenceModel {
  std::string checkpoint;
  torch::Device device = torch::kCPU;
  LoadedModel loaded;                // model in eval mode on `device`
  int64_t trained_positions = 0;     // trained_positions(loaded.config, checkpoint)
  std::unique_ptr<TextCodec> codec;  // resolved in the order above
  WeightFormat weights = WeightFormat::Fp32;  // the format most projection weights are held in (--weights)
};

// cache_options for an opened model: its config, trained positions and weights.
CacheOptions cache_options(const CacheFlags& o, const InferenceModel& m);

// The tokenizer file of the order above (step 1 with --tokenizer bytes, and step 4: ""), for commands that
// copy it (quantize).
std::string tokenizer_source(const ModelFlags& flags, const LoadedModel& loaded);

enum class NeedsText { Yes, No };  // No: the command reads token ids only (codec left null)

// Applies --threads, picks --device (cpu | cuda | auto, saying on stderr which it chose), loads --checkpoint
// with --set overrides, holds the projections in --weights (saying which, and where this CPU has no kernel
// for the format, what runs instead), and resolves the tokenizer. UserError naming the flag on any bad value.
InferenceModel open_inference_model(const ModelFlags& flags, NeedsText needs_text = NeedsText::Yes);

}  // namespace sinklm
