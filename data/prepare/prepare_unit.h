// One work unit of `prepare shards` (prepare_plan.h), start to finish: its documents are read in batches,
// decoded and tokenized on the rank's threads while the next batch is read, split by hash (hash_split.h)
// and appended in input order to the unit's own shards:
//   shard_file_name(split, unit, k) (shard_directory.h; token_shard.h), a new one after --shard-tokens tokens
// Its outcome is the unit record (JSON; written by prepare_job.cpp as the unit's completion mark):
//   {"unit", "disk_bytes", "input_bytes", "piece_lines": [lines of each piece],
//    "splits": {"train": {"shards": [names], "tokens", "documents"}, ...}, "empty_documents",
//    "bad_lines": [[piece, line in piece, problem], ...],
//    "documents": [[id, split, shard, tokens], ...]   (corpus directory inputs only)}
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/prepare/hash_split.h"
#include "data/prepare/input_files.h"
#include "data/prepare/prepare_plan.h"
#include "data/prepare/prepare_progress.h"
#include "data/tokenizers/tokenizer.h"

namespace sinklm {

struct UnitSettings {
  std::string text_field = "text";
  uint64_t shard_tokens = 100000000;
  int threads = 1;
  size_t batch_bytes = 4 << 20;  // record bytes read ahead while the previous batch is tokenized
};

struct UnitEnvironment {
  const std::vector<InputFile>& files;
  const Tokenizer& tokenizer;
  const HashSplitter& splitter;
  std::string out_dir;                      // where the shards go
  PrepareCounters& counters;
  const std::atomic<bool>& stop;            // raised: give up between batches
  std::function<void()> after_shard;        // called after each finished shard (fault injection in tests)
};

// The unit record, or nullopt when `stop` was raised first.
std::optional<nlohmann::json> process_unit(const WorkUnit& unit, const UnitSettings& settings,
                                           const UnitEnvironment& env);

}  // namespace sinklm
