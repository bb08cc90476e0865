// The typed, cross-checked view of the `train.*` config section for a job of `world_size` ranks.
#pragma once
#include <cstdint>
#include <string>

#include "core/config/config.h"
#include "data/shards/mixture_loader.h"
#include "train/adamw.h"

namespace sinklm {

enum class FaultAction { Kill, KillInCheckpoint, Hang, Nan, Sigusr1, Sigterm };

struct TrainOptions {
  int64_t steps = 0;
  int64_t seq_len = 0;
  int64_t global_batch_samples = 0;  // train.global_batch_tokens / seq_len
  int64_t micro_batch = 0;           // samples per rank per forward/backward
  int64_t accumulation = 0;          // micro-steps per optimizer step on each rank
  double lr = 0, min_lr_ratio = 0;
  int64_t warmup_steps = 0;
  AdamWOptions adamw;
  double sink_lr_multiplier = 1;  // train.sink_lr_multiplier: times each sink parameter spec's own multiplier
  double grad_clip = 0;
  std::string device;     // auto | cpu | cuda
  std::string precision;  // auto | fp32 | bf16
  bool zero = false;
  bool activation_checkpointing = false;
  int64_t trace_steps = 0;
  std::string communicator;  // auto | mpi | nccl
  int64_t bucket_bytes = 0;
  int64_t eval_every = 0, checkpoint_every = 0, keep_checkpoints = 0, log_every = 0;
  double checkpoint_minutes = 0;  // also checkpoint when this much wall time passed since the last (0 = off)
  int threads = 0;
  bool skip_nonfinite = false;
  double collective_timeout_s = 0;
  double peak_tflops = 0;
  int64_t profile_steps = 0;
  bool tensorboard = false;  // <run>/tensorboard/ event files beside metrics.jsonl
  std::string init_from;     // a checkpoint whose weights a fresh run starts from (model/io/init_from_checkpoint.h)
  int64_t validation_batches = 0;
  std::vector<MixtureSource> sources;  // data.shards (one source, weight 1) or data.mixture
  std::string shards;                  // the first source's directory: its tokenizer and probes speak for all
  uint64_t data_seed = 0;
  int64_t fault_step = -1;
  int fault_rank = 0;
  FaultAction fault_action = FaultAction::Kill;

  // Errors name the keys (and config.source()) when the batch arithmetic does not work out.
  static TrainOptions from(const Config& config, int world_size);
};

// The run's shard directories: data.shards as one source, or data.mixture's; UserError naming the keys when
// neither or both are set.
std::vector<MixtureSource> shard_sources(const Config& config);

}  // namespace sinklm
