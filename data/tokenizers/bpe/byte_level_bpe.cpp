#include "data/tokenizers/bpe/byte_level_bpe.h"

#include <algorithm>
#include <atomic>
#include <queue>

#include "core/error.h"
#include "data/tokenizers/nfc.h"
#include "core/system/parallel_for.h"

namespace sinklm {
namespace {

constexpr uint32_t kDead = UINT32_MAX;
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
    : vocab_(std::move(vocab)), merges_(vocab_.merges), instance_(next_instance++) {
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
  added_by_first_byte_.resize(256);
  bool have_eot = false;
  int64_t begin_of_text = -1;
  for (const auto& t : vocab_.added_tokens) {
    if (t.content.empty()) fail(vocab_.source, ": added token ", t.id, " is empty");
    id_bytes_[t.id] = t.content;
    id_known_[t.id] = true;
    added_by_first_byte_[static_cast<unsigned char>(t.content[0])].push_back(&t);
    // The special tokens by their names in the GPT-2/NeoX/Qwen2 (<|endoftext|>) and Llama-3 vocabularies.
    if (t.content == "<|endoftext|>" || (t.content == "<|end_of_text|>" && !have_eot)) {
      end_of_text_id_ = t.id;
      have_eot = true;
    }
    if (t.content == "<|begin_of_text|>") begin_of_text = t.id;
    if (t.content == "<|padding|>") padding_id_ = t.id;
  }
  begin_of_text_id_ = begin_of_text >= 0 ? static_cast<uint32_t>(begin_of_text) : end_of_text_id_;
  for (auto& list : added_by_first_byte_)
    std::stable_sort(list.begin(), list.end(),
                     [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
  if (!have_eot)
    fail(vocab_.source, ": no <|endoftext|> (or <|end_of_text|>) token; it separates documents in token shards "
         "(add it as an added token)");
}

std::string ByteLevelBpe::description() const {
  return str("byte-level BPE, ", vocab_size(), " ids, ", merges_.size(), " merges, from ", vocab_.source);
}

std::vector<ByteLevelBpe::Part> ByteLevelBpe::parts(std::string_view text, size_t max_text_bytes) const {
  std::vector<Part> out;
  auto add_text = [&](size_t begin, size_t end) {
    bool segment_start = true;
    while (begin < end) {
      size_t cut = end;
      if (end - begin > max_text_bytes) {
        cut = begin + max_text_bytes;
        while (cut < end && !Gpt2PreTokenizer::is_safe_cut(text, cut)) ++cut;
      }
      out.push_back(Part{text.substr(begin, cut - begin), -1, segment_start});
      segment_start = false;
      begin = cut;
    }
  };
  size_t text_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* match = nullptr;
    for (const AddedToken* t : added_by_first_byte_[static_cast<unsigned char>(text[pos])])
      if (text.compare(pos, t->content.size(), t->content) == 0) {
        match = t;
        break;
      }
    if (!match) {
      ++pos;
      continue;
    }
    add_text(text_start, pos);
    out.push_back(Part{text.substr(pos, match->content.size()), match->id, true});
    pos += match->content.size();
    text_start = pos;
  }
  add_text(text_start, text.size());
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
  for (std::string_view piece : pretokenizer_.split(text)) encode_piece(piece, out);
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
  struct Symbol {
    uint32_t id;
    int32_t prev, next;
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    uint32_t left, right, result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const int32_t n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i)
    symbols[i] = Symbol{byte_id_[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    uint32_t left = symbols[pos].id, right = symbols[symbols[pos].next].id;
    if (const MergeRule* rule = merges_.find(left, right))
      queue.push(Candidate{rule->rank, pos, left, right, rule->result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.pos];
    if (left.id != c.left || left.next < 0 || symbols[left.next].id != c.right) continue;  // stale
    Symbol& right = symbols[left.next];
    left.id = c.result;
    right.id = kDead;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.pos;
    consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
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
