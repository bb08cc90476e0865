#include "data/tokenizers/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "core/ends_with.h"
#include "core/error.h"
#include "data/tokenizers/bpe/byte_level_bpe_files.h"
#include "data/tokenizers/bpe/tokenizer_json.h"
#include "core/system/parallel_for.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"
#include "data/tokenizers/tokenizer_files.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

std::unique_ptr<Tokenizer> load_file(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  if (ends_with(name, ".tiktoken")) return std::make_unique<ByteLevelBpe>(read_tiktoken_ranks(path));
  if (ends_with(name, ".model")) return std::make_unique<SentencePieceTokenizer>(path);
  if (ends_with(name, "vocab.json")) {
    std::string merges = (fs::path(path).parent_path() / "merges.txt").string();
    if (!fs::exists(merges)) fail(path, ": a vocab.json needs merges.txt beside it (", merges, " is missing)");
    return std::make_unique<ByteLevelBpe>(read_vocab_and_merges(path, merges));
  }
  if (ends_with(name, ".json")) return load_tokenizer_json(path);
  fail(path, ": unknown tokenizer format; expected tokenizer.json, vocab.json (+ merges.txt), *.tiktoken or "
       "*.model (SentencePiece)");
}

}  // namespace

TokenIds Tokenizer::encode_large(std::string_view text, int /*threads*/) const { return encode(text); }

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (!fs::exists(path)) fail(path, ": tokenizer file not found");
  if (!fs::is_directory(path)) return load_file(path);
  const std::string file = find_tokenizer_file(path);
  if (file.empty()) fail(path, ": directory has no tokenizer (tokenizer.json, vocab.json, tokenizer.model or *.tiktoken)");
  return load_file(file);
}

int resolve_thread_count(int threads) {
  if (threads > 0) return threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

std::vector<TokenIds> encode_documents(const Tokenizer& tokenizer, const std::vector<std::string_view>& docs,
                                       int threads) {
  std::vector<TokenIds> ids(docs.size());
  parallel_for(docs.size(), resolve_thread_count(threads), [&](size_t i) { ids[i] = tokenizer.encode(docs[i]); });
  return ids;
}

}  // namespace sinklm
