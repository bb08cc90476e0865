// Training samples drawn from several shard directories with weights (data.mixture), one TokenLoader per
// source (token_loader.h: each its own epochs and permutation).
//
// Draw: stream position p goes to source i with probability w_i / sum(w), decided by a hash of (seed, p)
// alone, so the sources of a batch are the same on every rank and every run; the n-th position drawn for
// source i reads that source's stream position n. Every rank walks the whole global batch to keep the
// per-source counts (it reads only its own share), so the counts, and with them the per-source token totals,
// are global. One source with weight 1 draws every position from it: exactly TokenLoader's stream.
//
// Cursor (the trainer's checkpoint, trainer_state.json "loader"):
//   one source:  TokenLoader's cursor (token_loader.h), as a single-directory run always wrote it
//   a mixture:   {"mixture": {"position": P, "seed": S,
//                 "sources": [{"shards": dir, "weight": w, "tokens": drawn * text tokens per sample,
//                              "cursor": {TokenLoader cursor, position = samples drawn}}, ...]}}
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/shards/token_loader.h"

namespace sinklm {

struct MixtureSource {
  std::string shards;  // a directory from `sinklm prepare shards`
  double weight = 1;   // > 0; the weights need not sum to 1
  std::string name;    // for metrics: the directory's name, or its path where two names clash
};

// "DIR=WEIGHT, DIR=WEIGHT, ..." (data.mixture). UserError naming `where` for a missing or non-positive weight,
// an empty entry or a directory listed twice.
std::vector<MixtureSource> parse_mixture(const std::string& text, const std::string& where);

class MixtureLoader {
 public:
  MixtureLoader(std::vector<MixtureSource> sources, Split split, const LoaderOptions& options);

  // This rank's share of the next global batch: local_batch rows of seq_len ids, row-major.
  std::vector<uint32_t> next_batch();
  // Text tokens drawn from each source so far, over all ranks (samples x (seq_len - sinks)).
  std::vector<uint64_t> tokens_drawn() const;
  const std::vector<MixtureSource>& sources() const { return sources_; }

  nlohmann::json cursor() const;
  // UserError naming `where` when the cursor belongs to other sources, data or options.
  void restore(const nlohmann::json& cursor, const std::string& where);

 private:
  size_t source_of(uint64_t stream_position) const;

  std::vector<MixtureSource> sources_;
  std::vector<TokenLoader> loaders_;
  std::vector<double> cumulative_;  // normalised cumulative weights, the last exactly 1
  LoaderOptions options_;
  uint64_t draw_seed_ = 0;
  uint64_t position_ = 0;
  std::vector<uint64_t> drawn_;  // samples drawn per source
};

}  // namespace sinklm
