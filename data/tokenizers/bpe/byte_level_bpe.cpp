#include "data/tokenizers/bpe/byte_level_bpe.h"

#include <algorithm>
#include <atomic>

#include "core/error.h"
#include "data/tokenizers/nfc.h"
#include "core/system/parallel_for.h"

namespace sinklm {
namespace {

constexpr size_t kPieceCacheLimit = 1 << 18;  // entries
constexpr size_t kLongestCachedPiece = 256;     // bytes; longer pieces (runs of digits, spaces) are rare
constexpr size_t kParallelPartBytes = 1 << 20;

std::atomic<uint64_t> next_instance{1};

// Per-thread memo of piece -> ids for one tokenizer instance (natural text repeats its words a lot).
struct PieceCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, TokenIds> ids;
};

PieceCache& piece_cache(uint64_t instance) {
  thread_local PieceCache cache;
  if (cache.owner != instance || cache.ids.size() > kPieceCacheLimit) {
    cache.ids.clear();
    cache.owner = instance;
  }
  return cache;
}

}  // namespace

ByteLevelBpe::ByteLevelBpe(ByteLevelBpeVocab vocab)
    : vocab_(std::move(vocab)),
      pretokenizer_(vocab_.split_pattern.empty()
                        ? std::make_unique<RegexPreTokenizer>()
                        : std::make_unique<RegexPreTokenizer>(vocab_.split_pattern, vocab_.source + " pre_tokenizer Split")),
      merges_(vocab_.merges),
      added_(vocab_.added_tokens),
      instance_(next_instance++) {
  uint32_t size = 0;
  for (const auto& [bytes, id] : vocab_.tokens) size = std::max(size, id + 1);
  for (const auto& t : vocab_.added_tokens) size = std::max(size, t.id + 1);
  id_bytes_.resize(size);
  id_known_.resize(size);
  for (const auto& [bytes, id] : vocab_.tokens) {
    id_bytes_[id] = bytes;
    id_known_[id] = true;
    id_of_bytes_.emplace(bytes, id);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = id_of_bytes_.find(std::string(1, static_cast<char>(b)));
    if (it == id_of_bytes_.end())
      fail(vocab_.source, ": byte 0x", std::hex, b, " has no token; a byte-level BPE vocabulary needs all 256");
    byte_id_[b] = it->second;
  }
  for (const auto& t : vocab_.added_tokens) {
    if (t.content.empty()) fail(vocab_.source, ": added token ", t.id, " is empty");
    id_bytes_[t.id] = t.content;
    id_known_[t.id] = true;
  }
  const SpecialTokenIds special = special_ids_by_name(vocab_.added_tokens);
  if (special.end_of_text < 0)
    fail(vocab_.source, ": no <|endoftext|> (or <|end_of_text|>, </s>) token; it separates documents in token "
         "shards (add it as an added token)");
  end_of_text_id_ = static_cast<uint32_t>(special.end_of_text);
  begin_of_text_id_ = static_cast<uint32_t>(special.begin_of_text >= 0 ? special.begin_of_text : special.end_of_text);
  padding_id_ = special.padding;
}

std::string ByteLevelBpe::description() const {
  return str("byte-level BPE, ", vocab_size(), " ids, ", merges_.size(), " merges, from ", vocab_.source);
}

std::vector<ByteLevelBpe::Part> ByteLevelBpe::parts(std::string_view text, size_t max_text_bytes) const {
  std::vector<Part> out;
  for (const TextSpan& span : added_.split(text)) {
    if (span.added_id >= 0) {
      out.push_back(Part{span.text, span.added_id, true});
      continue;
    }
    bool segment_start = true;
    for (size_t begin = 0; begin < span.text.size();) {
      size_t cut = span.text.size();
      if (cut - begin > max_text_bytes) {
        cut = begin + max_text_bytes;
        while (cut < span.text.size() && !pretokenizer_->is_safe_cut(span.text, cut)) ++cut;
      }
      out.push_back(Part{span.text.substr(begin, cut - begin), -1, segment_start});
      segment_start = false;
      begin = cut;
    }
  }
  return out;
}

void ByteLevelBpe::encode_part(const Part& part, TokenIds& out) const {
  if (part.added_id >= 0) {
    out.push_back(static_cast<uint32_t>(part.added_id));
    return;
  }
  std::string prepared;
  std::string_view text = part.text;
  if (vocab_.nfc) {
    prepared = nfc_normalize(text);
    text = prepared;
  }
  if (vocab_.add_prefix_space && part.segment_start && (text.empty() || text[0] != ' ')) {
    prepared = " " + std::string(text);
    text = prepared;
  }
  for (std::string_view piece : pretokenizer_->split(text)) encode_piece(piece, out);
}

void ByteLevelBpe::encode_piece(std::string_view piece, TokenIds& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (vocab_.whole_piece_first) {
    auto it = id_of_bytes_.find(std::string(piece));
    if (it != id_of_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (piece.size() > kLongestCachedPiece) {
    merge_bytes(piece, out);
    return;
  }
  PieceCache& cache = piece_cache(instance_);
  std::string key(piece);
  auto hit = cache.ids.find(key);
  if (hit != cache.ids.end()) {
    out.insert(out.end(), hit->second.begin(), hit->second.end());
    return;
  }
  TokenIds ids;
  merge_bytes(piece, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  cache.ids.emplace(std::move(key), std::move(ids));
}

void ByteLevelBpe::merge_bytes(std::string_view piece, TokenIds& out) const {
  std::vector<uint32_t> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_id_[static_cast<unsigned char>(piece[i])];
  merge_symbols(symbols, merges_, out);
}

TokenIds ByteLevelBpe::encode(std::string_view text) const {
  TokenIds out;
  out.reserve(text.size() / 3 + 1);
  for (const Part& part : parts(text, SIZE_MAX)) encode_part(part, out);
  return out;
}

TokenIds ByteLevelBpe::encode_large(std::string_view text, int threads) const {
  std::vector<Part> all = parts(text, kParallelPartBytes);
  std::vector<TokenIds> ids(all.size());
  parallel_for(all.size(), resolve_thread_count(threads), [&](size_t i) { encode_part(all[i], ids[i]); });
  TokenIds out;
  for (const auto& part : ids) out.insert(out.end(), part.begin(), part.end());
  return out;
}

std::string ByteLevelBpe::decode(const TokenIds& ids) const {
  std::string out;
  for (uint32_t id : ids) {
    if (id >= id_bytes_.size() || !id_known_[id])
      fail("token id ", id, " is not in the vocabulary of ", vocab_.source, " (", vocab_size(), " ids)");
    out += id_bytes_[id];
  }
  return out;
}

}  // namespace sinklm
