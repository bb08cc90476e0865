#include "data/tokenizers/hf_tokenizer_json.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <unordered_map>

#include "core/ends_with.h"
#include "core/error.h"
#include "data/tokenizers/bpe/byte_level_alphabet.h"
#include "data/tokenizers/bpe/byte_level_bpe_files.h"
#include "data/tokenizers/bpe/tokenizer_json.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

using json = nlohmann::json;

constexpr const char* kMetaspace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

json added_token(const std::string& content, int64_t id) {
  return {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},   {"normalized", false}, {"special", true}};
}

json bpe_model(json vocab, json merges) {
  return {{"type", "BPE"},          {"dropout", nullptr},     {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
          {"byte_fallback", false}, {"ignore_merges", false}, {"vocab", std::move(vocab)},
          {"merges", std::move(merges)}};
}

json tokenizer_root(json model, json pre_tokenizer, json decoder, json added_tokens) {
  return {{"version", "1.0"},        {"truncation", nullptr},          {"padding", nullptr},
          {"added_tokens", std::move(added_tokens)}, {"normalizer", nullptr},
          {"pre_tokenizer", std::move(pre_tokenizer)}, {"post_processor", nullptr},
          {"decoder", std::move(decoder)}, {"model", std::move(model)}};
}

// vocab.json + merges.txt and tiktoken rank files: GPT-2's byte-level BPE.
json byte_level_json(const ByteLevelBpeVocab& vocab) {
  std::vector<std::string> text_of(vocab.tokens.size() + vocab.added_tokens.size());
  json tokens = json::object(), added = json::array();
  for (const auto& [bytes, id] : vocab.tokens) {
    if (id >= text_of.size()) text_of.resize(id + 1);
    text_of[id] = bytes_to_alphabet(bytes);
    tokens[text_of[id]] = id;
  }
  for (const AddedToken& t : vocab.added_tokens) {
    tokens[t.content] = t.id;  // GPT-2's tokenizer.json lists <|endoftext|> in the vocabulary too
    added.push_back(added_token(t.content, t.id));
  }
  std::vector<MergeRule> rules = vocab.merges;
  std::stable_sort(rules.begin(), rules.end(), [](const MergeRule& a, const MergeRule& b) { return a.rank < b.rank; });
  json merges = json::array();
  for (const MergeRule& m : rules) merges.push_back({text_of.at(m.left), text_of.at(m.right)});
  json model = bpe_model(std::move(tokens), std::move(merges));
  model["ignore_merges"] = vocab.whole_piece_first;
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                           {"use_regex", true}};
  return tokenizer_root(std::move(model), byte_level, byte_level, std::move(added));
}

// SentencePiece BPE: the merges transformers' converter derives (every split of a piece into two pieces,
// the piece's score first, then the halves' ids), Metaspace without a split.
json sentencepiece_json(const SentencePieceModel& spm, const std::string& path) {
  if (!spm.bpe)
    fail(path, ": a unigram SentencePiece model has no BPE merges; sinklm converts SentencePiece BPE models "
         "(`sinklm prepare sentencepiece` trains one)");
  if (!spm.identity_normalization)
    fail(path, ": this SentencePiece model normalises its input (NFKC or whitespace collapsing), which a "
         "tokenizer.json written by sinklm would not reproduce; train it with --normalization_rule_name=identity "
         "--remove_extra_whitespaces=false");
  using Kind = SentencePiece::Kind;
  json vocab = json::object(), added = json::array();
  std::unordered_map<std::string, int64_t> id_of;
  for (size_t id = 0; id < spm.pieces.size(); ++id) {
    const SentencePiece& p = spm.pieces[id];
    vocab[p.text] = id;
    id_of[p.text] = static_cast<int64_t>(id);
    if (p.kind == Kind::Control || p.kind == Kind::Unknown) added.push_back(added_token(p.text, id));
  }
  std::vector<std::tuple<float, int64_t, int64_t, int64_t>> merges;  // (-score, left id, right id, piece id)
  for (size_t id = 0; id < spm.pieces.size(); ++id) {
    const SentencePiece& p = spm.pieces[id];
    if (p.kind != Kind::Normal) continue;
    for (size_t cut = 1; cut < p.text.size(); ++cut) {
      if ((static_cast<unsigned char>(p.text[cut]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      auto left = id_of.find(p.text.substr(0, cut)), right = id_of.find(p.text.substr(cut));
      if (left == id_of.end() || right == id_of.end()) continue;
      if (spm.pieces[left->second].kind != Kind::Normal || spm.pieces[right->second].kind != Kind::Normal) continue;
      merges.emplace_back(-p.score, left->second, right->second, static_cast<int64_t>(id));
    }
  }
  std::sort(merges.begin(), merges.end());
  json merge_list = json::array();
  for (const auto& m : merges)
    merge_list.push_back({spm.pieces[std::get<1>(m)].text, spm.pieces[std::get<2>(m)].text});
  json model = bpe_model(std::move(vocab), std::move(merge_list));
  model["byte_fallback"] = true;
  model["fuse_unk"] = true;
  if (spm.unknown_id >= 0) model["unk_token"] = spm.pieces[spm.unknown_id].text;
  const json metaspace = {{"type", "Metaspace"}, {"replacement", kMetaspace},
                          {"prepend_scheme", spm.dummy_prefix ? "first" : "never"}, {"split", false}};
  json steps = json::array({{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                            {{"type", "ByteFallback"}},
                            {{"type", "Fuse"}}});
  if (spm.dummy_prefix) steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return tokenizer_root(std::move(model), metaspace, {{"type", "Sequence"}, {"decoders", steps}}, std::move(added));
}

}  // namespace

json hf_tokenizer_json(const std::string& tokenizer_file) {
  const std::string name = fs::path(tokenizer_file).filename().string();
  if (ends_with(name, ".tiktoken")) return byte_level_json(read_tiktoken_ranks(tokenizer_file));
  if (ends_with(name, ".model")) return sentencepiece_json(read_sentencepiece_model(tokenizer_file), tokenizer_file);
  if (ends_with(name, "vocab.json")) {
    const std::string merges = (fs::path(tokenizer_file).parent_path() / "merges.txt").string();
    return byte_level_json(read_vocab_and_merges(tokenizer_file, merges));
  }
  if (ends_with(name, ".json")) {
    json root = read_json_file_for_tokenizer(tokenizer_file);
    tokenizer_from_json(root, tokenizer_file);  // refuses what sinklm does not read, naming the component
    root["post_processor"] = nullptr;  // sinklm never applied it: ids equal sinklm's only without it
    auto& added = root["added_tokens"];  // nor a Hugging Face view's sink tokens (read_added_tokens leaves them out)
    if (added.is_array())
      added.erase(std::remove_if(added.begin(), added.end(), [](const json& t) {
                    return t.value("special", false) && is_sink_token_text(t.value("content", ""));
                  }), added.end());
    return root;
  }
  fail(tokenizer_file, ": no Hugging Face tokenizer.json can be written for this file (expected tokenizer.json, "
       "vocab.json + merges.txt, *.tiktoken or a SentencePiece *.model)");
}

}  // namespace sinklm
