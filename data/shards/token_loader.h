// Training-facing reader of token shards (torch-free: it returns token id buffers).
//
// Samples: each shard is cut into consecutive, non-overlapping windows of seq_len - k text tokens (k = number
// of sink ids; windows never cross shards, the remainder of a shard is unused); a sample is the k sink ids
// followed by its window, so it always has seq_len positions.
// Order: epoch e visits every sample once in a permutation fixed by (seed, e) (or in file order when
// shuffle is off, as for validation); epochs follow each other without a gap, so the samples form one
// endless stream. Global batch b is stream positions [b*B, (b+1)*B); rank r of R reads positions
// [b*B + r*B/R, b*B + (r+1)*B/R): disjoint shares that together cover the batch.
// Cursor: the number of stream positions consumed; restoring it continues with exactly the sample that would
// have come next.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus/corpus_split.h"
#include "data/shards/token_shard.h"

namespace sinklm {

struct LoaderOptions {
  int64_t seq_len = 0;             // positions per sample, sink positions included
  int64_t global_batch = 0;        // samples per step over all ranks; a multiple of world_size
  int rank = 0;
  int world_size = 1;
  uint64_t seed = 0;
  bool shuffle = true;             // false: file order (fixed validation batches)
  std::vector<uint32_t> sink_ids;  // model.sink.mode token: these ids fill the first positions
};

struct LoaderCursor {
  uint64_t position = 0;           // global stream positions consumed (all ranks)
  uint64_t seed = 0;               // checked on restore: resuming with other data or options is an error
  uint64_t samples_per_epoch = 0;
  int64_t seq_len = 0;
  int64_t global_batch = 0;

  std::string to_json() const;
  static LoaderCursor from_json(const std::string& text, const std::string& where);
};

// Not thread-safe (it caches the current epoch's permutation); one loader per rank.
// Validation: open the validation split with shuffle = false and read the first N batches; they are the
// same samples on every run.
class TokenLoader {
 public:
  TokenLoader(std::vector<TokenShard> shards, LoaderOptions options);
  // The shards of `split` in a directory from `sinklm prepare shards`.
  static TokenLoader open(const std::string& shard_dir, Split split, LoaderOptions options);

  uint64_t samples_per_epoch() const { return samples_per_epoch_; }
  int64_t local_batch() const { return options_.global_batch / options_.world_size; }
  uint64_t epoch() const { return position_ / samples_per_epoch_; }

  // This rank's share of the next global batch: local_batch() rows of seq_len ids, row-major.
  std::vector<uint32_t> next_batch();
  // The sample at a global stream position (seq_len ids).
  std::vector<uint32_t> sample_at(uint64_t stream_position) const;

  LoaderCursor cursor() const;
  void restore(const LoaderCursor& cursor);  // UserError when it belongs to other data or options

 private:
  uint64_t sample_index(uint64_t stream_position) const;

  std::vector<TokenShard> shards_;
  LoaderOptions options_;
  int64_t text_len_ = 0;
  std::vector<uint64_t> first_sample_;  // first_sample_[s] = global index of shard s's first window
  uint64_t samples_per_epoch_ = 0;
  uint64_t position_ = 0;
  mutable uint64_t permutation_epoch_ = UINT64_MAX;
  mutable std::vector<uint64_t> permutation_;
};

}  // namespace sinklm
