#include "data/synthetic/bigram_backcopy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/seeded_random.h"

namespace sinklm {
namespace {

constexpr char kOrdinary[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
constexpr char kTriggers[] = "!?#$%&*+";
constexpr char kMarker = '@';

}  // namespace

double SyntheticStream::mean_nll() const {
  double sum = 0;
  for (float lp : log_prob) sum -= lp;
  return log_prob.empty() ? 0 : sum / static_cast<double>(log_prob.size());
}

double SyntheticStream::copy_fraction() const {
  return ids.empty() ? 0 : static_cast<double>(copies) / static_cast<double>(ids.size());
}

BigramBackcopy::BigramBackcopy(BigramBackcopyOptions options) : options_(options), symbol_index_(256, -1) {
  const int64_t max_symbols = static_cast<int64_t>(sizeof kOrdinary) - 1;
  const int64_t max_triggers = static_cast<int64_t>(sizeof kTriggers) - 1;
  if (options_.symbols < 2 || options_.symbols > max_symbols)
    fail("--symbols ", options_.symbols, ": must be in [2, ", max_symbols, "] (letters and digits)");
  if (options_.successors < 1 || options_.successors > options_.symbols)
    fail("--successors ", options_.successors, ": must be in [1, --symbols = ", options_.symbols, "]");
  if (options_.triggers < 0 || options_.triggers > max_triggers)
    fail("--triggers ", options_.triggers, ": must be in [0, ", max_triggers, "]");
  if (!(options_.trigger_rate >= 0 && options_.trigger_rate < 1))
    fail("--trigger-rate ", options_.trigger_rate, ": must be in [0, 1)");
  if (options_.rule == CopyRule::AfterMarker &&
      !(options_.marker_rate > 0 && options_.trigger_rate + options_.marker_rate < 1))
    fail("--marker-rate ", options_.marker_rate, ": must be in (0, 1 - --trigger-rate)");
  if (options_.marker_window < 2) fail("--marker-window ", options_.marker_window, ": must be at least 2");
  symbols_.assign(kOrdinary, static_cast<size_t>(options_.symbols));
  triggers_.assign(kTriggers, static_cast<size_t>(options_.triggers));
  for (size_t i = 0; i < symbols_.size(); ++i) symbol_index_[static_cast<unsigned char>(symbols_[i])] = static_cast<int>(i);

  // Row i: `successors` distinct symbols in a seeded order, Zipf weights 1/(r+1) by rank r.
  double zipf_total = 0;
  for (int64_t r = 0; r < options_.successors; ++r) zipf_total += 1.0 / static_cast<double>(r + 1);
  table_.resize(static_cast<size_t>(options_.symbols));
  for (int64_t i = 0; i < options_.symbols; ++i) {
    std::vector<uint64_t> order =
        seeded_permutation(static_cast<uint64_t>(options_.symbols), seeded_hash(options_.seed, "bigram row " + std::to_string(i)));
    for (int64_t r = 0; r < options_.successors; ++r)
      table_[i].push_back({static_cast<int64_t>(order[r]), 1.0 / static_cast<double>(r + 1) / zipf_total});
  }
}

std::pair<int64_t, double> BigramBackcopy::draw_successor(int64_t row, double u) const {
  const auto& successors = table_[static_cast<size_t>(row)];
  double cumulative = 0;
  for (const auto& successor : successors) {
    cumulative += successor.second;
    if (u < cumulative) return successor;
  }
  return successors.back();
}

SyntheticStream BigramBackcopy::generate(uint64_t length, uint64_t stream_seed) const {
  SyntheticStream out;
  out.ids.reserve(length);
  out.log_prob.reserve(length);
  SeededUniform uniform(seeded_hash(options_.seed, "stream " + std::to_string(stream_seed)));
  const double trigger_share = options_.triggers > 0 ? options_.trigger_rate / static_cast<double>(options_.triggers) : 0;
  const bool marker_rule = options_.rule == CopyRule::AfterMarker;
  const double marker_rate = marker_rule ? options_.marker_rate : 0;
  auto emit = [&](int64_t id, double log_prob) {
    out.ids.push_back(static_cast<uint32_t>(id));
    out.log_prob.push_back(static_cast<float>(log_prob));
  };
  auto emit_uniform_symbol = [&] {
    const int64_t s = static_cast<int64_t>(uniform.below(static_cast<uint64_t>(options_.symbols)));
    emit(static_cast<unsigned char>(symbols_[s]), -std::log(static_cast<double>(options_.symbols)));
  };
  std::vector<uint64_t> markers;  // positions of the markers so far
  // The position trigger j would copy from if it were placed at position t, or -1 when it may not come.
  auto copy_source = [&](int64_t j, uint64_t t) -> int64_t {
    if (!marker_rule) {
      if (t < static_cast<uint64_t>(j + 1)) return -1;
      const uint64_t source = t - 1 - static_cast<uint64_t>(j);
      return symbol_index_[out.ids[source]] >= 0 ? static_cast<int64_t>(source) : -1;
    }
    if (markers.size() <= static_cast<size_t>(j)) return -1;
    const uint64_t marker = markers[markers.size() - 1 - static_cast<size_t>(j)];
    if (marker + 1 >= t || t - marker > static_cast<uint64_t>(options_.marker_window)) return -1;
    return static_cast<int64_t>(marker + 1);  // always an ordinary symbol (drawn uniformly after the marker)
  };

  int64_t pending_copy = -1;   // the token just emitted was a trigger: copy this position next
  bool after_marker = false;   // the token just emitted was the marker: a uniform symbol next
  for (uint64_t t = 0; t < length; ++t) {
    if (t == 0 || after_marker) {
      emit_uniform_symbol();
      after_marker = false;
      continue;
    }
    if (pending_copy >= 0) {  // the token after a trigger: the copy, certain
      emit(out.ids[static_cast<size_t>(pending_copy)], 0.0);
      ++out.copies;
      pending_copy = -1;
      continue;
    }
    // The previous token is ordinary: trigger j (probability trigger_rate / triggers, when it may come), the
    // marker (marker_rate), or an ordinary successor from the bigram row.
    int64_t eligible = 0;
    for (int64_t j = 0; j < options_.triggers; ++j) eligible += copy_source(j, t) >= 0;
    const double stay = 1.0 - trigger_share * static_cast<double>(eligible) - marker_rate;
    const double u = uniform.next();
    if (u < options_.trigger_rate) {
      const int64_t j = std::min<int64_t>(static_cast<int64_t>(u / options_.trigger_rate * options_.triggers), options_.triggers - 1);
      const int64_t source = copy_source(j, t);
      if (source >= 0) {
        emit(static_cast<unsigned char>(triggers_[j]), std::log(trigger_share));
        pending_copy = source;
        continue;
      }
    } else if (u < options_.trigger_rate + marker_rate) {
      emit(kMarker, std::log(marker_rate));
      markers.push_back(t);
      after_marker = true;
      continue;
    }
    // A fresh draw, so the trigger decision does not bias which successor comes.
    const auto [next, p] = draw_successor(symbol_index_[out.ids[t - 1]], uniform.next());
    emit(static_cast<unsigned char>(symbols_[next]), std::log(stay * p));
  }
  return out;
}

std::vector<SyntheticStream> BigramBackcopy::generate_documents(uint64_t length, uint64_t mean_length,
                                                               uint64_t stream_seed) const {
  if (mean_length < 2) fail("--document-tokens ", mean_length, ": must be at least 2 (or 0: one stream per split)");
  SeededUniform uniform(seeded_hash(options_.seed, "document lengths " + std::to_string(stream_seed)));
  std::vector<SyntheticStream> documents;
  for (uint64_t total = 0; total < length;) {
    const uint64_t drawn = mean_length / 2 + static_cast<uint64_t>(uniform.next() * static_cast<double>(mean_length + 1));
    const uint64_t size = std::min(std::max<uint64_t>(drawn, 1), length - total);
    documents.push_back(generate(size, seeded_hash(stream_seed, "document " + std::to_string(documents.size()))));
    total += size;
  }
  return documents;
}

}  // namespace sinklm
