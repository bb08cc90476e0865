// What a training checkpoint adds to a model checkpoint (model/io/checkpoint.h), and how a run resumes:
//
//   RUN_DIR/checkpoints/step_00000100/      one complete checkpoint (manifest.json covers every file)
//     config.json, model.safetensors, sinklm.yaml      the model, as in any checkpoint
//     optimizer.safetensors                  AdamW moments "exp_avg", "exp_avg_sq" [N] float32 (N = the flat
//                                            parameter count, see train/distributed/flat_parameters.h), or with ZeRO-1
//     optimizer.rank<R>.safetensors          rank R's range of them; metadata "begin", "end" give the range
//     trainer_state.json                     {"format": "sinklm-train-state", "version": 1, "step": completed
//                                            steps, "adam_steps": n, "world_size": R, "zero": bool,
//                                            "flat_numel": N, "loader": {cursor of data/shards/mixture_loader.h}}
//   RUN_DIR/checkpoints/step_00000100.partial/   being written by all ranks; never read
//
// The data order is a pure function of data.seed and the loader cursor, and training draws no random
// numbers (no dropout), so step, weights, moments and cursor are the whole state: resuming from them
// reproduces an uninterrupted run bit for bit.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include <torch/types.h>

#include <vector>

#include "core/config/config.h"
#include "model/io/checkpoint.h"

namespace sinklm {

std::string checkpoint_dir_for_step(const std::string& run_dir, int64_t step);

// The newest checkpoint under RUN_DIR/checkpoints whose manifest verifies; damaged or partial ones are
// skipped with a warning on stderr.
std::optional<std::string> newest_complete_checkpoint(const std::string& run_dir);

// Removes all but the newest `keep` checkpoints.
void prune_checkpoints(const std::string& run_dir, int64_t keep);

struct OptimizerState {
  torch::Tensor exp_avg, exp_avg_sq;  // [flat_numel] float32, unpadded
};
// Reassembles the full moments from optimizer.safetensors or every optimizer.rank<R>.safetensors, so a run
// may resume with a different number of ranks or ZeRO setting.
OptimizerState read_optimizer_state(const std::string& checkpoint_dir, int64_t flat_numel);

nlohmann::json read_trainer_state(const std::string& checkpoint_dir);

// The tokenizer files every checkpoint of the run carries, so `sinklm stream`/`serve`/`eval` find them there:
// data.tokenizer's (vocab.json brings its merges.txt), else the copy in data.shards (manifest
// "tokenizer_files"; a mixture's first source); empty when neither names one (bytes). UserError when
// data.tokenizer is missing or is not the tokenizer the shards were made with (their sha256 differ), or when
// a mixture's sources were made with different tokenizers.
std::vector<std::string> run_tokenizer_files(const Config& config);

}  // namespace sinklm
