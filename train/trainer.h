// The pretraining loop: data-parallel over the ranks of a DistributedContext, gradient accumulation to a
// global batch, AdamW with warmup + cosine, global-norm clipping, periodic validation, atomic checkpoints
// and exact resume. One object per rank; every rank runs the same sequence of collectives.
#pragma once
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "core/config.h"
#include "data/token_loader.h"
#include "model/gpt_neox.h"
#include "train/adamw.h"
#include "train/communicator.h"
#include "train/distributed_context.h"
#include "train/flat_parameters.h"
#include "train/gradient_synchronizer.h"
#include "train/train_options.h"

namespace sinklm {

struct TrainSummary {
  int64_t steps = 0;
  double last_loss = 0;
  double validation_loss = 0;  // NaN when no validation ran
  double tokens_per_second = 0;
  std::string last_checkpoint;
};

class Trainer {
 public:
  // resume: continue from the newest complete checkpoint in run_dir (start fresh when there is none).
  Trainer(Config config, std::string run_dir, bool resume, const DistributedContext& context);
  ~Trainer();
  TrainSummary run();

 private:
  struct StepResult {
    double loss = 0, grad_norm = 0, lr = 0;
    bool skipped = false;
  };
  void open_loaders();
  void open_run_directory();  // rank 0: config.yaml, metrics.jsonl (cut back to the resumed step)
  void restore(const std::string& checkpoint_dir);
  StepResult train_step(int64_t step);
  torch::Tensor batch_tensor(std::vector<uint32_t>& batch) const;
  torch::Tensor micro_batch_loss(const torch::Tensor& rows);  // summed token NLL of [micro, seq_len] ids
  double reduce_gradients();                                   // returns the global gradient norm
  double validation_loss();
  void save_checkpoint(int64_t steps_done);
  void inject_fault(int64_t step, FaultAction at) const;
  void log(const nlohmann::json& record);  // one metrics.jsonl line (rank 0)

  Config config_;
  std::string run_dir_;
  const DistributedContext& context_;
  TrainOptions options_;
  ModelConfig model_config_;
  torch::Device device_;
  bool bf16_ = false;
  GPTNeoXForCausalLM model_{nullptr};
  std::unique_ptr<FlatParameters> flat_;
  int64_t flat_numel_ = 0;             // parameters without padding
  int64_t shard_begin_ = 0, shard_numel_ = 0;  // this rank's optimizer range
  torch::Tensor shard_grads_;          // ZeRO-1: this rank's reduced gradient range
  std::unique_ptr<FlatAdamW> optimizer_;
  std::unique_ptr<Communicator> communicator_;
  std::unique_ptr<GradientSynchronizer> synchronizer_;
  std::unique_ptr<TokenLoader> loader_, validation_loader_;
  LoaderCursor validation_start_;
  int64_t first_step_ = 0;
  int64_t targets_per_sample_ = 0;
  double flops_per_token_ = 0, peak_flops_ = 0;
  std::ofstream metrics_;
};

}  // namespace sinklm
