#include "data/shards/token_loader.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/seeded_random.h"
#include "data/shards/shard_directory.h"

namespace sinklm {

std::string LoaderCursor::to_json() const {
  return nlohmann::json{{"position", position}, {"seed", seed}, {"samples_per_epoch", samples_per_epoch},
                        {"seq_len", seq_len}, {"global_batch", global_batch}}
      .dump();
}

LoaderCursor LoaderCursor::from_json(const std::string& text, const std::string& where) {
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    return LoaderCursor{j.at("position").get<uint64_t>(), j.at("seed").get<uint64_t>(),
                        j.at("samples_per_epoch").get<uint64_t>(), j.at("seq_len").get<int64_t>(),
                        j.at("global_batch").get<int64_t>()};
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": not a data loader cursor: ", e.what());
  }
}

TokenLoader::TokenLoader(std::vector<TokenShard> shards, LoaderOptions options)
    : shards_(std::move(shards)), options_(std::move(options)) {
  const int64_t sinks = static_cast<int64_t>(options_.sink_ids.size());
  if (options_.seq_len <= sinks)
    fail("data loader: seq_len ", options_.seq_len, " must exceed the number of sink tokens (", sinks, ")");
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size)
    fail("data loader: rank ", options_.rank, " is outside world size ", options_.world_size);
  if (options_.global_batch < 1 || options_.global_batch % options_.world_size != 0)
    fail("data loader: global batch ", options_.global_batch, " must be a positive multiple of the world size ",
         options_.world_size);
  SINKLM_ASSERT(!shards_.empty(), "data loader without shards");
  for (uint32_t id : options_.sink_ids)
    if (id < shards_.front().vocab_size())
      fail("data loader: sink id ", id, " collides with the tokenizer's ids [0, ", shards_.front().vocab_size(),
           "); sink ids follow model.tokenizer_vocab_size");
  text_len_ = options_.seq_len - sinks;
  for (const TokenShard& s : shards_) {
    first_sample_.push_back(samples_per_epoch_);
    samples_per_epoch_ += s.token_count() / static_cast<uint64_t>(text_len_);
  }
  if (samples_per_epoch_ == 0)
    fail(shards_.front().path(), ": the shards hold fewer than ", text_len_, " tokens per shard, not one sample of seq_len ",
         options_.seq_len);
}

TokenLoader TokenLoader::open(const std::string& shard_dir, Split split, LoaderOptions options) {
  return TokenLoader(open_split_shards(shard_dir, split), std::move(options));
}

uint64_t TokenLoader::sample_index(uint64_t stream_position) const {
  const uint64_t epoch = stream_position / samples_per_epoch_, offset = stream_position % samples_per_epoch_;
  if (!options_.shuffle) return offset;
  if (permutation_epoch_ != epoch) {
    permutation_ = seeded_permutation(samples_per_epoch_, splitmix64(options_.seed) ^ splitmix64(~epoch));
    permutation_epoch_ = epoch;
  }
  return permutation_[offset];
}

std::vector<uint32_t> TokenLoader::sample_at(uint64_t stream_position) const {
  const uint64_t index = sample_index(stream_position);
  size_t shard = static_cast<size_t>(std::upper_bound(first_sample_.begin(), first_sample_.end(), index) -
                                     first_sample_.begin() - 1);
  std::vector<uint32_t> ids(options_.sink_ids);
  ids.reserve(static_cast<size_t>(options_.seq_len));
  shards_[shard].copy_tokens((index - first_sample_[shard]) * static_cast<uint64_t>(text_len_),
                             static_cast<uint64_t>(text_len_), ids);
  return ids;
}

std::vector<uint32_t> TokenLoader::next_batch() {
  std::vector<uint32_t> batch;
  batch.reserve(static_cast<size_t>(local_batch() * options_.seq_len));
  const uint64_t first = position_ + static_cast<uint64_t>(options_.rank * local_batch());
  for (int64_t row = 0; row < local_batch(); ++row) {
    std::vector<uint32_t> sample = sample_at(first + static_cast<uint64_t>(row));
    batch.insert(batch.end(), sample.begin(), sample.end());
  }
  position_ += static_cast<uint64_t>(options_.global_batch);
  return batch;
}

LoaderCursor TokenLoader::cursor() const {
  return LoaderCursor{position_, options_.seed, samples_per_epoch_, options_.seq_len, options_.global_batch};
}

void TokenLoader::restore(const LoaderCursor& c) {
  if (c.seed != options_.seed || c.samples_per_epoch != samples_per_epoch_ || c.seq_len != options_.seq_len ||
      c.global_batch != options_.global_batch)
    fail("data loader: the saved cursor is for seed ", c.seed, ", ", c.samples_per_epoch, " samples of ", c.seq_len,
         " tokens, global batch ", c.global_batch, "; this run has seed ", options_.seed, ", ", samples_per_epoch_,
         " samples of ", options_.seq_len, ", global batch ", options_.global_batch,
         " (resume with the same data and data/batch settings)");
  position_ = c.position;
}

}  // namespace sinklm
