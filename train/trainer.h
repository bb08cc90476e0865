// The pretraining loop: data-parallel over the ranks of a DistributedContext, gradient accumulation to a
// global batch, AdamW with warmup + cosine, global-norm clipping, periodic validation, atomic checkpoints
// and exact resume. One object per rank; every rank runs the same sequence of collectives, all through its
// Communicator. Its parts: train/distributed/gradient_reduction.h (replicated or ZeRO-1: reduce, clip, step, optimizer
// files), train/monitor/throughput.h (tokens/s, MFU, ETA), train/monitor/step_profile.h (where a step's time goes),
// train/fault_injection.h (the dist tests' failures).
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/config/config.h"
#include "data/shards/mixture_loader.h"
#include "export/hf_tokenizer_files.h"
#include "model/gpt_neox.h"
#include "train/distributed/communicator.h"
#include "train/distributed/distributed_context.h"
#include "train/fault_injection.h"
#include "train/distributed/flat_parameters.h"
#include "train/distributed/gradient_reduction.h"
#include "train/monitor/step_profile.h"
#include "train/monitor/throughput.h"
#include "train/train_options.h"

namespace sinklm {

class SinkProbe;
class TensorBoardEvents;

// Mean next-token NLL over the validation batches. `matched` leaves out the one target per sample whose text
// context is not 1 .. seq_len-2 tokens (Trainer::unmatched_target_column), so a sink token model and its
// vanilla twin are scored on the same context lengths; `all` is every target. NaN when no validation ran.
struct ValidationLoss {
  double all = std::nan("");
  double matched = std::nan("");
};

struct TrainSummary {
  int64_t steps = 0;
  double last_loss = 0;
  ValidationLoss validation;
  double tokens_per_second = 0;
  std::string last_checkpoint;
  // "SIGTERM" or "SIGUSR1" when a stop signal ended the run before its last step (train/stop_signal.h): the
  // newest checkpoint holds every step done; the command exits with kPreemptedExitCode.
  std::string stopped_by;
};

// Scores a run logs beside its loss that come from libraries above train/ (zero-shot tasks: the train command
// builds this from train.eval_tasks). `score` runs on every rank with the model as it is; `sum_over_ranks` is a
// collective each rank calls once; it returns {"name": value} for metrics.jsonl ("zero_shot") and TensorBoard.
struct PeriodicEvaluation {
  int64_t every = 0;  // steps; 0: only after the last step
  std::function<nlohmann::json(GPTNeoXForCausalLM& model, int rank, int world,
                               const std::function<void(std::vector<double>&)>& sum_over_ranks)>
      score;
};

class Trainer {
 public:
  // resume: continue from the newest complete checkpoint in run_dir (start fresh when there is none).
  Trainer(Config config, std::string run_dir, bool resume, const DistributedContext& context);
  ~Trainer();
  TrainSummary run();
  // The config as resolved for the run (model.* sizes and ids from the tokenizer: train/run_vocabulary.h).
  const Config& config() const { return config_; }
  // The run's tokenizer files (train/training_checkpoint.h: run_tokenizer_files); empty for bytes.
  const std::vector<std::string>& tokenizer_files() const { return tokenizer_files_; }
  void set_periodic_evaluation(PeriodicEvaluation evaluation) { evaluation_ = std::move(evaluation); }

 private:
  // What the ranks agreed at a step boundary: stop on a signal (0 = none), or checkpoint by wall time.
  struct Stop {
    int signal = 0;
    bool checkpoint_due = false;
  };
  using StopVotes = std::array<double, 3>;  // SIGTERM seen, SIGUSR1 seen, wall-time checkpoint due
  struct StepResult {
    double loss = 0, grad_norm = 0, lr = 0;
    bool skipped = false;
    Stop stop;
  };
  StopVotes stop_votes() const;
  static Stop agreed_stop(const StopVotes& summed);
  bool stopped_during_start_up(TrainSummary& summary);  // collective
  void open_loaders(const DistributedContext& context);
  void open_run_directory();  // rank 0: config.yaml, metrics.jsonl (cut back to the resumed step), tensorboard/
  void restore(const std::string& checkpoint_dir);
  StepResult train_step(int64_t step);
  torch::Tensor batch_tensor(std::vector<uint32_t>& batch) const;
  torch::Tensor loss_features(const torch::Tensor& input);
  torch::Tensor summed_loss(const torch::Tensor& features, const torch::Tensor& target) const;
  torch::Tensor targets(const torch::Tensor& rows) const;
  torch::Tensor micro_batch_loss(const torch::Tensor& rows);  // summed token NLL of [micro, seq_len] ids
  int64_t unmatched_target_column() const;
  ValidationLoss validation_loss();
  void save_checkpoint(int64_t steps_done);
  void report_progress(int64_t done, const StepResult& r, TrainSummary& summary);
  void report_profile();  // collective: <run>/profile.json and the table (rank 0)
  void log(const nlohmann::json& record);  // one metrics.jsonl line and its TensorBoard scalars (rank 0)
  void evaluate_tasks(int64_t done);       // evaluation_, logged as "zero_shot" (collective)

  // Before config_: the resolution of config_ reads them. A wrong tokenizer fails now, not at the first checkpoint.
  std::vector<std::string> tokenizer_files_;  // copied into every checkpoint (run_tokenizer_files)
  std::optional<CheckpointTokenizer> checkpoint_tokenizer_;  // them and their Hugging Face view, made at the first save
  Config config_;
  std::string run_dir_;
  std::string init_from_note_;  // what train.init_from copied, for the start-up line
  PeriodicEvaluation evaluation_;
  TrainOptions options_;
  ModelConfig model_config_;
  torch::Device device_;
  bool bf16_ = false;
  GPTNeoXForCausalLM model_{nullptr};
  std::unique_ptr<FlatParameters> flat_;
  int64_t flat_numel_ = 0;  // parameters without padding
  std::unique_ptr<Communicator> communicator_;
  std::unique_ptr<GradientReduction> reduction_;
  FaultInjection faults_;
  std::unique_ptr<ThroughputMeter> throughput_;
  std::unique_ptr<StepProfile> profile_;  // train.profile_steps
  std::unique_ptr<SinkProbe> sink_probe_;  // train.sink_probe_every; rank 0 only (train/monitor/sink_probe.h)
  std::unique_ptr<MixtureLoader> loader_, validation_loader_;
  nlohmann::json validation_start_;
  int64_t first_step_ = 0;
  std::chrono::steady_clock::time_point last_checkpoint_time_;  // train.checkpoint_minutes counts from here
  int64_t targets_per_sample_ = 0;
  std::ofstream metrics_;
  std::unique_ptr<TensorBoardEvents> tensorboard_;  // rank 0, train.tensorboard: what metrics_ gets, as scalars
};

}  // namespace sinklm
