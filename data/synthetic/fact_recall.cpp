#include "data/synthetic/fact_recall.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/seeded_random.h"
#include "data/io/read_file.h"

namespace sinklm {
namespace {

constexpr char kKeys[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
constexpr int64_t kMaxFillerSymbols = 26;  // the lowercase letters: keys and markers stay out of the filler

BigramBackcopyOptions filler_options(const FactRecallOptions& o) {
  if (o.symbols < 2 || o.symbols > kMaxFillerSymbols)
    fail("--symbols ", o.symbols, ": must be in [2, ", kMaxFillerSymbols, "] for --task recall (lowercase letters)");
  BigramBackcopyOptions filler;
  filler.symbols = o.symbols;
  filler.successors = o.successors;
  filler.triggers = 0;
  filler.trigger_rate = 0;
  filler.seed = o.seed;
  return filler;
}

// Appends tokens to a stream; filler comes from the chain, continuing from the previous lowercase symbol.
class StreamWriter {
 public:
  StreamWriter(const FactRecall& source, RecallStream& out, uint64_t seed) : source_(source), out_(out), uniform_(seed) {}
  SeededUniform& uniform() { return uniform_; }
  int64_t size() const { return static_cast<int64_t>(out_.ids.size()); }
  void emit(uint32_t id, double log_prob, bool filler) {
    out_.ids.push_back(id);
    out_.log_prob.push_back(static_cast<float>(log_prob));
    out_.filler.push_back(filler);
  }
  // A filler symbol: uniform at the start, else the chain's successor; `stay` is the chance that filler comes.
  void filler(double stay) {
    const BigramBackcopy& chain = source_.filler();
    if (out_.ids.empty()) {
      const int64_t s = static_cast<int64_t>(uniform_.below(static_cast<uint64_t>(chain.options().symbols)));
      emit(static_cast<unsigned char>(chain.symbols()[s]), -std::log(static_cast<double>(chain.options().symbols)), true);
      return;
    }
    const auto [next, p] = chain.draw_successor(next_row(), uniform_.next());
    emit(static_cast<unsigned char>(chain.symbols()[next]), std::log(stay * p), true);
  }
  // The bigram row the next filler symbol is drawn from (fact_recall.h: order 1 or 2).
  int64_t next_row() const {
    const BigramBackcopy& chain = source_.filler();
    const int64_t symbols = chain.options().symbols, n = static_cast<int64_t>(out_.ids.size());
    const int64_t previous = std::max<int64_t>(chain.row_of(out_.ids[n - 1]), 0);
    if (source_.options().order == 1) return previous;
    const int64_t before = n >= 2 ? std::max<int64_t>(chain.row_of(out_.ids[n - 2]), 0) : 0;
    return (previous + 7 * before) % symbols;
  }
  uint32_t draw_value() {
    const BigramBackcopy& chain = source_.filler();
    return static_cast<unsigned char>(chain.symbols()[uniform_.below(static_cast<uint64_t>(chain.options().symbols))]);
  }

 private:
  const FactRecall& source_;
  RecallStream& out_;
  SeededUniform uniform_;
};

}  // namespace

double RecallStream::mean_nll() const {
  double sum = 0;
  for (float lp : log_prob) sum -= lp;
  return log_prob.empty() ? 0 : sum / static_cast<double>(log_prob.size());
}

FactRecall::FactRecall(FactRecallOptions options) : options_(options), filler_(filler_options(options)) {
  if (options_.order != 1 && options_.order != 2) fail("--order ", options_.order, ": must be 1 or 2");
  if (options_.symbols % 7 == 0) fail("--symbols ", options_.symbols, ": must not be a multiple of 7 (the order-2 row mix)");
  if (options_.keys < 1 || options_.keys > static_cast<int64_t>(sizeof kKeys) - 1)
    fail("--keys ", options_.keys, ": must be in [1, 26] (uppercase letters)");
  if (!(options_.fact_rate > 0 && options_.fact_rate < 0.5))
    fail("--fact-rate ", options_.fact_rate, ": must be in (0, 0.5)");
  if (options_.min_distance < 4 || options_.max_distance < options_.min_distance + 6 * options_.keys)
    fail("--min-distance ", options_.min_distance, " and --max-distance ", options_.max_distance,
         ": need 4 <= min and max >= min + 6 x --keys (a query comes after its fact's three tokens and a filler "
         "symbol; queries need room to fall due apart)");
}

nlohmann::json recall_options_json(const FactRecallOptions& o) {
  return {{"symbols", o.symbols}, {"successors", o.successors}, {"order", o.order}, {"keys", o.keys},
          {"fact_rate", o.fact_rate}, {"min_distance", o.min_distance},
          {"max_distance", o.max_distance}, {"seed", o.seed}};
}

FactRecallOptions recall_options_from_json(const nlohmann::json& json, const std::string& path) {
  FactRecallOptions o;
  auto read = [&](const char* key, auto& field) {
    if (!json.contains(key)) fail(path, ": synthetic.recall.", key, " is missing (written by `sinklm prepare synthetic --task recall`)");
    try {
      field = json.at(key).get<std::remove_reference_t<decltype(field)>>();
    } catch (const nlohmann::json::exception&) {
      fail(path, ": synthetic.recall.", key, " is ", json.at(key).dump(), ", not a number");
    }
  };
  read("symbols", o.symbols);
  read("successors", o.successors);
  read("order", o.order);
  read("keys", o.keys);
  read("fact_rate", o.fact_rate);
  read("min_distance", o.min_distance);
  read("max_distance", o.max_distance);
  read("seed", o.seed);
  return o;
}

char FactRecall::key_symbol(int64_t k) const { return kKeys[k]; }

RecallStream FactRecall::generate(uint64_t length, uint64_t stream_seed) const {
  RecallStream out;
  StreamWriter w(*this, out, seeded_hash(options_.seed, "recall stream " + std::to_string(stream_seed)));
  struct Awaiting {
    int64_t key_position = -1;  // -1: no fact of this key awaits its query
    uint32_t value = 0;
    int64_t due = 0;            // the stream position of the query's marker
  };
  std::vector<Awaiting> facts(static_cast<size_t>(options_.keys));
  // A query's distance, drawn uniformly from [min, max - 2] until no other query falls due within 3 tokens of
  // it: then a query waits at most for a fact being written (2 tokens), and its distance stays <= max.
  auto draw_distance = [&](SeededUniform& uniform, const std::vector<Awaiting>& awaiting, int64_t key_position) {
    const uint64_t span = static_cast<uint64_t>(options_.max_distance - 2 - options_.min_distance + 1);
    for (;;) {
      const int64_t d = options_.min_distance + static_cast<int64_t>(uniform.below(span));
      bool clear = true;
      for (const Awaiting& other : awaiting)
        clear &= other.key_position < 0 || std::abs(other.due - (key_position - 1 + d)) >= 3;
      if (clear) return d;
    }
  };
  const double value_log_prob = -std::log(static_cast<double>(options_.symbols));
  w.filler(1.0);
  while (w.size() < static_cast<int64_t>(length)) {
    int64_t due = -1;  // the key whose query is due, the earliest first
    std::vector<int64_t> free_keys;
    for (int64_t k = 0; k < options_.keys; ++k) {
      const Awaiting& f = facts[static_cast<size_t>(k)];
      if (f.key_position < 0) free_keys.push_back(k);
      else if (f.due <= w.size() && (due < 0 || f.due < facts[static_cast<size_t>(due)].due)) due = k;
    }
    if (due >= 0) {
      Awaiting& f = facts[static_cast<size_t>(due)];
      w.emit(kQueryMarker, 0.0, false);
      out.queries.push_back({w.size() + 1, w.size() - f.key_position});
      w.emit(static_cast<unsigned char>(key_symbol(due)), 0.0, false);
      w.emit(f.value, 0.0, false);
      f.key_position = -1;
    } else if (w.uniform().next() < options_.fact_rate && !free_keys.empty()) {
      const int64_t k = free_keys[w.uniform().below(free_keys.size())];
      Awaiting& f = facts[static_cast<size_t>(k)];
      w.emit(kFactMarker, std::log(options_.fact_rate), false);
      f = {w.size(), w.draw_value(), 0};
      f.due = f.key_position - 1 + draw_distance(w.uniform(), facts, f.key_position);
      w.emit(static_cast<unsigned char>(key_symbol(k)), -std::log(static_cast<double>(free_keys.size())), false);
      w.emit(f.value, value_log_prob, false);
    } else {
      w.filler(1.0 - options_.fact_rate);
    }
  }
  // A fact or query may run past the length: cut it, with any query whose answer is gone.
  out.ids.resize(length);
  out.log_prob.resize(length);
  out.filler.resize(length);
  while (!out.queries.empty() && out.queries.back().answer >= static_cast<int64_t>(length)) out.queries.pop_back();
  return out;
}

RecallStream FactRecall::probe(int64_t distance, int64_t pairs, int64_t lead, int64_t tail, uint64_t stream_seed) const {
  if (distance < 4) fail("recall distance ", distance, ": must be at least 4");
  if (pairs < 1 || lead < 1 || tail < 0) fail("recall probe: pairs and lead must be at least 1, tail at least 0");
  // Facts every `spacing` tokens. Key reuse after `keys` facts must come after the query (keys * spacing >
  // distance + 3), and a query must not touch a fact's three tokens: distance mod spacing in [4, spacing - 4].
  int64_t spacing = std::max<int64_t>(8, (distance + 3) / options_.keys + 1);
  while (distance % spacing < 4 || distance % spacing > spacing - 4) ++spacing;
  const int64_t length = lead + (pairs - 1) * spacing + distance + 3 + tail;
  std::vector<int64_t> fact_at(static_cast<size_t>(length), -1), query_at(static_cast<size_t>(length), -1);
  for (int64_t i = 0; i < pairs; ++i) {
    fact_at[static_cast<size_t>(lead + i * spacing)] = i;
    query_at[static_cast<size_t>(lead + i * spacing + distance)] = i;
  }
  RecallStream out;
  StreamWriter w(*this, out, seeded_hash(options_.seed, "recall probe " + std::to_string(stream_seed)));
  std::vector<uint32_t> values(static_cast<size_t>(pairs));
  while (w.size() < length) {
    const size_t t = static_cast<size_t>(w.size());
    if (fact_at[t] >= 0) {
      const int64_t i = fact_at[t];
      values[static_cast<size_t>(i)] = w.draw_value();
      w.emit(kFactMarker, 0, false);
      w.emit(static_cast<unsigned char>(key_symbol(i % options_.keys)), 0, false);
      w.emit(values[static_cast<size_t>(i)], 0, false);
    } else if (query_at[t] >= 0) {
      const int64_t i = query_at[t];
      w.emit(kQueryMarker, 0, false);
      out.queries.push_back({w.size() + 1, distance});
      w.emit(static_cast<unsigned char>(key_symbol(i % options_.keys)), 0, false);
      w.emit(values[static_cast<size_t>(i)], 0, false);
    } else {
      w.filler(1.0);
    }
  }
  out.log_prob.clear();
  return out;
}

FactRecall read_recall_source(const std::string& dir, const std::string& flag) {
  const std::string path = dir + "/manifest.json";
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(flag, " ", path, ": not JSON (", e.what(), ")");
  }
  const nlohmann::json synthetic = manifest.value("synthetic", nlohmann::json::object());
  if (synthetic.value("task", "") != "recall" || !synthetic.contains("recall"))
    fail(flag, " ", dir, ": not a recall source (synthetic.task is ", synthetic.value("task", std::string("missing")),
         "); write one with `sinklm prepare synthetic --task recall --out ", dir, "`");
  return FactRecall(recall_options_from_json(synthetic["recall"], path));
}

}  // namespace sinklm
