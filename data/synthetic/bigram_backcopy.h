// A seeded synthetic token stream that forces an attention head to be dormant most of the time: the
// Bigram-Backcopy task of Guo et al., "Active-Dormant Attention Heads: Mechanistically Demystifying
// Extreme-Token Phenomena in LLMs" (2024, arXiv 2410.13835).
//
//   ordinary symbols  a first-order Markov chain: each symbol has `successors` possible next symbols with
//                     Zipf weights 1/1, 1/2, ... (normalised), chosen per symbol from the seed
//   triggers          after an ordinary symbol, with probability `trigger_rate` a trigger comes next (one of
//                     `triggers`, uniformly), and after the trigger a copy of an earlier token:
//                       backcopy (Guo et al.)  trigger j (0-based) copies the token j+1 positions before it
//                                              (trigger 0: the token just before the trigger)
//                       after-marker           trigger j copies the token that followed the (j+1)-th most recent
//                                              marker '@' (at most `marker_window` back); the marker comes after
//                                              an ordinary symbol with probability `marker_rate` and is followed
//                                              by a uniformly drawn symbol. Finding that token needs two layers
//                                              (one to mark "my previous token is '@'", one to look it up), so
//                                              the copy head cannot sit in layer 0.
//                     A trigger is only drawn when its source exists, so copies are always ordinary symbols.
//
// Predicting a copy needs an attention head that looks back; on every other token the same head must add
// nothing, and attending to a fixed token with a near-zero value is how softmax attention does nothing: the
// attention sink. Unlike Guo et al., the stream has no BOS token: training samples are cut from it exactly
// as from text (data/shards/token_loader.h), so a vanilla model's only candidate sink is whatever sits at
// position 0, while a `token` model has its sink token there.
//
// Ids are bytes: ordinary symbols are the letters and digits, triggers are punctuation ("!?#$%&*+"), so a
// stream is also a readable text file that the byte codec (data/tokenizers/text_codec.h) maps back to the same ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

enum class CopyRule { Backcopy, AfterMarker };

struct BigramBackcopyOptions {
  CopyRule rule = CopyRule::Backcopy;
  int64_t symbols = 48;        // ordinary symbols, at most 62 (a-z, A-Z, 0-9)
  int64_t successors = 6;      // possible next symbols per ordinary symbol
  int64_t triggers = 2;        // at most 8; trigger j copies the token j+1 before it
  double trigger_rate = 0.15;  // chance that an ordinary symbol is followed by a trigger
  double marker_rate = 0.1;    // after-marker: chance that the marker follows an ordinary symbol
  int64_t marker_window = 32;  // after-marker: a trigger only comes while its marker is at most this far back
  uint64_t seed = 1;           // the bigram table; each stream has its own seed besides
};

// One generated stream: ids (bytes) and, per token, the generator's own log-probability of it given
// everything before it (the first token: log 1/symbols), so the best achievable loss is known.
struct SyntheticStream {
  std::vector<uint32_t> ids;
  std::vector<float> log_prob;
  double mean_nll() const;        // the oracle's loss, nats per token
  double copy_fraction() const;   // share of tokens that are copies
  uint64_t copies = 0;
};

class BigramBackcopy {
 public:
  // UserError naming the option when it is out of range (options are command-line flags).
  explicit BigramBackcopy(BigramBackcopyOptions options);

  const BigramBackcopyOptions& options() const { return options_; }
  const std::string& symbols() const { return symbols_; }    // ordinary symbols, index = row of the table
  const std::string& triggers() const { return triggers_; }  // trigger j copies from j+1 back
  // successors(i): (symbol index, probability) pairs of row i, in decreasing probability.
  const std::vector<std::pair<int64_t, double>>& successors(int64_t row) const { return table_[row]; }
  // The successor of row `row` that a uniform draw u in [0, 1) picks: (symbol index, probability).
  std::pair<int64_t, double> draw_successor(int64_t row, double u) const;
  // The row of an ordinary symbol's id, -1 for any other id.
  int64_t row_of(uint32_t id) const { return id < symbol_index_.size() ? symbol_index_[id] : -1; }

  // `length` tokens; the same (options, stream_seed) always give the same stream.
  SyntheticStream generate(uint64_t length, uint64_t stream_seed) const;
  // Document-packed, as real pretraining packs text: independent streams (each from its own seed, so each
  // starts afresh: no copy reaches into another document) whose lengths are drawn uniformly from
  // [mean_length/2, 3*mean_length/2], until `length` tokens in all (the last one cut). The caller puts the
  // end-of-text id after each, so that separator, not position 0, is the one token with a fixed identity.
  std::vector<SyntheticStream> generate_documents(uint64_t length, uint64_t mean_length, uint64_t stream_seed) const;

 private:
  BigramBackcopyOptions options_;
  std::string symbols_, triggers_;
  std::vector<std::vector<std::pair<int64_t, double>>> table_;
  std::vector<int> symbol_index_;  // byte -> ordinary symbol index, -1 for others
};

}  // namespace sinklm
