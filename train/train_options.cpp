#include "train/train_options.h"

#include <cmath>

#include "core/error.h"

namespace sinklm {

TrainOptions TrainOptions::from(const Config& c, int world_size) {
  const std::string& where = c.source();
  TrainOptions o;
  o.steps = c.get_int("train.steps");
  o.seq_len = c.get_int("train.seq_len");
  const int64_t batch_tokens = c.get_int("train.global_batch_tokens");
  o.micro_batch = c.get_int("train.micro_batch");
  if (batch_tokens % o.seq_len != 0)
    fail(where, ": train.global_batch_tokens (", batch_tokens, ") must be a multiple of train.seq_len (", o.seq_len, ")");
  o.global_batch_samples = batch_tokens / o.seq_len;
  const int64_t per_micro_step = o.micro_batch * world_size;
  if (o.global_batch_samples % per_micro_step != 0)
    fail(where, ": the global batch of ", o.global_batch_samples, " samples (train.global_batch_tokens / train.seq_len) "
         "must be a multiple of train.micro_batch (", o.micro_batch, ") x ranks (", world_size,
         "); adjust train.micro_batch or train.global_batch_tokens");
  o.accumulation = o.global_batch_samples / per_micro_step;
  o.lr = c.get_float("train.lr");
  o.min_lr_ratio = c.get_float("train.min_lr_ratio");
  o.warmup_steps = static_cast<int64_t>(std::llround(c.get_float("train.warmup_fraction") * o.steps));
  o.adamw = {c.get_float("train.beta1"), c.get_float("train.beta2"), c.get_float("train.eps"),
             c.get_float("train.weight_decay")};
  o.sink_lr_multiplier = c.get_float("train.sink_lr_multiplier");
  o.grad_clip = c.get_float("train.grad_clip");
  o.device = c.get_string("train.device");
  o.precision = c.get_string("train.precision");
  o.zero = c.get_string("train.zero") == "1";
  o.activation_checkpointing = c.get_bool("train.activation_checkpointing");
  o.trace_steps = c.get_int("train.trace_steps");
  o.communicator = c.get_string("train.communicator");
  o.bucket_bytes = c.get_int("train.bucket_mb") << 20;
  o.eval_every = c.get_int("train.eval_every");
  o.checkpoint_every = c.get_int("train.checkpoint_every");
  o.keep_checkpoints = c.get_int("train.keep_checkpoints");
  o.checkpoint_minutes = c.get_float("train.checkpoint_minutes");
  o.log_every = c.get_int("train.log_every");
  o.threads = static_cast<int>(c.get_int("train.threads"));
  o.skip_nonfinite = c.get_string("train.nan_policy") == "skip";
  o.collective_timeout_s = static_cast<double>(c.get_int("train.collective_timeout_s"));
  o.peak_tflops = c.get_float("train.peak_tflops");
  o.profile_steps = c.get_int("train.profile_steps");
  o.tensorboard = c.get_bool("train.tensorboard");
  o.init_from = c.get_string("train.init_from");
  o.validation_batches = c.get_int("data.validation_batches");
  o.sources = shard_sources(c);
  o.shards = o.sources.front().shards;
  o.data_seed = static_cast<uint64_t>(c.get_int("data.seed"));
  o.fault_step = c.get_int("train.fault.step");
  o.fault_rank = static_cast<int>(c.get_int("train.fault.rank"));
  const std::string& action = c.get_string("train.fault.action");
  o.fault_action = action == "kill"                 ? FaultAction::Kill
                   : action == "kill_in_checkpoint" ? FaultAction::KillInCheckpoint
                   : action == "hang"               ? FaultAction::Hang
                   : action == "sigusr1"            ? FaultAction::Sigusr1
                   : action == "sigterm"            ? FaultAction::Sigterm
                                                    : FaultAction::Nan;
  return o;
}

std::vector<MixtureSource> shard_sources(const Config& config) {
  const std::string& shards = config.get_string("data.shards");
  const std::string& mixture = config.get_string("data.mixture");
  if (!shards.empty() && !mixture.empty())
    fail(config.source(), ": data.shards and data.mixture are both set; use data.mixture alone (a source with its "
         "weight each) or data.shards alone");
  if (!mixture.empty()) return parse_mixture(mixture, config.source());
  if (shards.empty())
    fail(config.source(), ": data.shards is not set; point it at a directory from `sinklm prepare shards` (or list "
         "several in data.mixture)");
  return {MixtureSource{shards, 1.0, shards}};
}

}  // namespace sinklm
