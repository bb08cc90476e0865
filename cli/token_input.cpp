#include "cli/token_input.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/shards/shard_directory.h"

namespace sinklm {
namespace {

std::string read_whole_file(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(flag, " ", path, ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<int64_t> read_ids_file(const std::string& path, const ModelConfig& model) {
  std::istringstream in(read_whole_file(path, "--ids"));
  std::vector<int64_t> ids;
  for (std::string word; in >> word;) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
    }
    if (used != word.size() || id < 0 || id >= model.tokenizer_vocab_size)
      fail("--ids ", path, ": '", word, "' is not a token id in [0, ", model.tokenizer_vocab_size, ")");
    ids.push_back(id);
  }
  return ids;
}

std::vector<int64_t> read_test_split(const std::string& dir, const ModelConfig& model, int64_t max_tokens) {
  const std::vector<TokenShard> shards = open_split_shards(dir, Split::Test);
  if (shards.front().vocab_size() != model.tokenizer_vocab_size)
    fail("--shards ", dir, ": its tokenizer has ", shards.front().vocab_size(), " ids, the model's ",
         model.tokenizer_vocab_size, " (shards of another tokenizer?)");
  const std::vector<uint32_t> tokens = concatenated_tokens(shards, max_tokens);
  return {tokens.begin(), tokens.end()};
}

}  // namespace

std::vector<FlagSpec> token_input_flags(TokenInputFlags& f, bool ids) {
  std::vector<FlagSpec> flags = {
      flag(&f.text, "text", "FILE", "UTF-8 text (tokenized with --tokenizer / the checkpoint's / bytes)"),
      flag(&f.shards, "shards", "DIR", "the test split of a `prepare shards` directory, documents separated by "
                                       "the end-of-text id as in training")};
  if (ids) flags.push_back(flag(&f.ids, "ids", "FILE", "whitespace-separated token ids"));
  return flags;
}

TokenInput read_token_input(const TokenInputFlags& f, const ModelConfig& model, const TextCodec* codec,
                            int64_t max_tokens) {
  SINKLM_ASSERT(f.count() == 1, "read_token_input needs exactly one input");
  TokenInput in;
  in.tokenizer = "token ids";
  if (!f.shards.empty()) {
    in.ids = read_test_split(f.shards, model, max_tokens);
    in.source = "--shards " + f.shards + " (test split)";
    if (codec) in.tokenizer = codec->description();
    return in;
  }
  if (!f.ids.empty()) {
    in.ids = read_ids_file(f.ids, model);
    in.source = "--ids " + f.ids;
  } else {
    SINKLM_ASSERT(codec, "--text needs the model's tokenizer");
    in.ids = codec->encode(read_whole_file(f.text, "--text"));
    in.source = "--text " + f.text;
    in.tokenizer = codec->description();
  }
  if (max_tokens >= 0 && static_cast<int64_t>(in.ids.size()) > max_tokens) in.ids.resize(max_tokens);
  return in;
}

}  // namespace sinklm
