// A seeded synthetic stream that measures long-range recall (StreamingLLM's StreamEval, in token form):
// filler from the Bigram-Backcopy chain (data/synthetic/bigram_backcopy.h, without triggers) with planted
// facts and later queries whose answers only the fact gives.
//
//   filler  lowercase symbols of a Markov chain (Zipf-weighted successors) of order 2 by default: the next
//           symbol's row of the bigram table is (row(previous) + 7 x row(the one before)) mod symbols, so
//           predicting filler needs the token before the current one. That makes a previous-token head
//           useful on its own, the first half of the induction circuit that finding a fact needs (with a
//           first-order chain nothing rewards that head until the whole circuit exists, and a 2-layer model
//           did not learn recall in 1,500 steps; with it, 1,500 steps reached 0.98 at d = 16). A marker or key in the window counts as row 0.
//   fact    '@' K v   after a filler symbol, with probability fact_rate: the fact marker, a key K (uniformly
//                     one of the `keys` uppercase letters that no fact awaits a query for) and its value v (a
//                     filler symbol, uniformly)
//   query   '?' K v   every fact is asked once, d tokens later (d drawn uniformly from min_distance to
//                     max_distance - 2, at least 3 tokens from any other query's due position; a query due
//                     while a fact is written comes right after it, so d <= max_distance): the query marker,
//                     the key and the fact's value, certain given the fact and at chance (1/symbols) without it
// The distance of a query is between its key and the fact's key. After v the chain goes on from v's row.
// The oracle's log-probabilities count a query's marker and key as certain (the generator knows its
// schedule), so its loss is a lower bound for any model.
//
// Ids are bytes, so a stream is also readable text that the byte codec maps back to the same ids.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/synthetic/bigram_backcopy.h"

namespace sinklm {

struct FactRecallOptions {
  int64_t symbols = 24;         // filler and value symbols, at most 26 (a-z)
  int64_t successors = 6;       // possible next filler symbols per symbol
  int64_t order = 2;            // the filler chain's order: 1 or 2
  int64_t keys = 16;            // at most 26 (A-Z)
  double fact_rate = 0.1;       // chance that a fact follows a filler symbol
  int64_t min_distance = 4;     // fewest tokens between a fact's key and its query's key
  int64_t max_distance = 100;   // most (>= min + 6 x keys): below the training length, so a sample holds both
  uint64_t seed = 1;            // the filler chain; each stream has its own seed besides
};

// One query of a stream: the answer sits at ids[answer], the query's key at answer - 1.
struct RecallQuery {
  int64_t answer = 0;
  int64_t distance = 0;  // tokens from the fact's key to the query's key
};

struct RecallStream {
  std::vector<uint32_t> ids;
  std::vector<float> log_prob;       // the generator's own log-probability of each token (training streams)
  std::vector<RecallQuery> queries;  // in stream order
  std::vector<bool> filler;          // per token: drawn from the chain (not a marker, key, value or answer)
  double mean_nll() const;           // the oracle's loss, nats per token
};

// The options as the manifest of `prepare synthetic --task recall` keeps them ("synthetic"."recall"), and back:
// UserError naming `path` and the key when one is missing or of the wrong type.
nlohmann::json recall_options_json(const FactRecallOptions& options);
FactRecallOptions recall_options_from_json(const nlohmann::json& json, const std::string& path);

class FactRecall;
// The recall source that `prepare synthetic --task recall` wrote into `dir` (its manifest's synthetic.recall);
// UserError naming `flag` and the directory otherwise.
FactRecall read_recall_source(const std::string& dir, const std::string& flag);

class FactRecall {
 public:
  // UserError naming the flag when an option is out of range (options are command-line flags).
  explicit FactRecall(FactRecallOptions options);

  const FactRecallOptions& options() const { return options_; }
  const BigramBackcopy& filler() const { return filler_; }
  char key_symbol(int64_t k) const;
  static constexpr char kFactMarker = '@';
  static constexpr char kQueryMarker = '?';

  // A training stream of `length` tokens: facts and queries at random, as described above.
  RecallStream generate(uint64_t length, uint64_t stream_seed) const;
  // A probe stream: `lead` filler tokens, then `pairs` facts, each asked exactly `distance` tokens later
  // (keys in turn, spaced so that no other fact or query of a key comes between its fact and its query),
  // then filler to `tail` tokens past the last answer. log_prob is left empty.
  RecallStream probe(int64_t distance, int64_t pairs, int64_t lead, int64_t tail, uint64_t stream_seed) const;

 private:
  FactRecallOptions options_;
  BigramBackcopy filler_;
};

}  // namespace sinklm
