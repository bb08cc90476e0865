#include "train/run_vocabulary.h"

#include <string>

#include "core/error.h"
#include "data/shards/shard_directory.h"
#include "data/tokenizers/tokenizer.h"
#include "model/model_config.h"
#include "train/train_options.h"

namespace sinklm {

namespace {

// What the run's tokenizer says (-1: it does not say).
struct TokenizerVocabulary {
  std::string description;
  int64_t size = -1, eos = -1, bos = -1, pad = -1;
};

TokenizerVocabulary run_tokenizer_vocabulary(const Config& config, const std::vector<std::string>& files) {
  if (!files.empty()) {
    const auto tokenizer = load_tokenizer(files.front());
    return {tokenizer->description(), tokenizer->vocab_size(), tokenizer->end_of_text_id(),
            tokenizer->begin_of_text_id(), tokenizer->padding_id()};
  }
  const std::string dir = shard_sources(config).front().shards;  // every source has its tokenizer
  const ShardTokenizer shards = read_shard_tokenizer(dir);
  const std::string description =
      (shards.description.empty() ? std::string("the tokenizer") : shards.description) + " of " + dir;
  return {description, shards.vocab_size, shards.end_of_text_id, shards.end_of_text_id, -1};
}

// Sets `key` from the tokenizer's `value` when the config leaves it at -1; refuses another value.
void resolve_id(Config& config, const char* key, int64_t value, const char* what, const TokenizerVocabulary& t) {
  const int64_t set = config.get_int(key);
  if (value < 0) return;
  if (set < 0) {
    config.set(key, std::to_string(value), t.description);
    return;
  }
  if (set != value)
    fail(config.source(), ": ", key, " = ", set, ", but the run's tokenizer (", t.description, ") has ", what, " ",
         value, "; drop the key (-1 follows the tokenizer) or set it to ", value);
}

}  // namespace

Config with_run_vocabulary(Config config, const std::vector<std::string>& tokenizer_files) {
  const TokenizerVocabulary t = run_tokenizer_vocabulary(config, tokenizer_files);
  if (t.size >= 0) {
    const int64_t set = config.get_int("model.tokenizer_vocab_size");
    if (set < 0) config.set("model.tokenizer_vocab_size", std::to_string(t.size), t.description);
    else if (set < t.size)
      fail(config.source(), ": model.tokenizer_vocab_size = ", set, ", but the run's tokenizer (", t.description,
           ") has ", t.size, " ids, which would not fit; drop the key (-1 follows the tokenizer) or set it to ", t.size);
  }
  resolve_id(config, "model.eos_token_id", t.eos, "end-of-text", t);
  resolve_id(config, "model.bos_token_id", t.bos, "beginning-of-text", t);
  resolve_id(config, "model.pad_token_id", t.pad, "padding", t);
  config.set("model.vocab_size", std::to_string(ModelConfig::from(config).vocab_size), "model.tokenizer_vocab_size");
  return config;
}

}  // namespace sinklm
