#include <cmath>
#include <iostream>
#include <memory>

#include "core/config/args.h"
#include "core/error.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "data/tokenizers/text_codec.h"
#include "eval/zero_shot/loglikelihood_scorer.h"
#include "eval/zero_shot/task_share.h"
#include "eval/zero_shot/tasks/benchmark_data.h"
#include "train/stop_signal.h"
#include "train/trainer.h"

namespace sinklm {
namespace {

// train.eval_tasks: the official sets (eval/zero_shot/tasks/benchmark_data.h), their first
// train.eval_tasks_limit documents each, scored with the run's tokenizer and spread over the ranks
// (eval/zero_shot/task_share.h). Sets and tokenizer are loaded now, so a wrong name fails before step 1.
PeriodicEvaluation zero_shot_evaluation(const Config& config, const std::vector<std::string>& files) {
  const std::string list = config.get_string("train.eval_tasks");
  if (list.empty()) return {};
  const int64_t limit = config.get_int("train.eval_tasks_limit");
  auto tasks = std::make_shared<std::vector<ZeroShotTask>>();
  for (const auto& name : task_list(list)) tasks->push_back(load_official_task(name, limit));
  std::shared_ptr<TextCodec> codec = load_text_codec(files.empty() ? "bytes" : files.front(), "",
                                                     ModelConfig::from(config).tokenizer_vocab_size);
  PeriodicEvaluation evaluation;
  evaluation.every = config.get_int("train.eval_tasks_every");
  evaluation.score = [tasks, codec](GPTNeoXForCausalLM& model, int rank, int world,
                                    const std::function<void(std::vector<double>&)>& sum_over_ranks) {
    LoglikelihoodScorer scorer(model, *codec, 16);
    return score_tasks_over_ranks(scorer, *tasks, rank, world, sum_over_ranks);
  };
  return evaluation;
}

}  // namespace

int run_train_command(const std::vector<std::string>& argv) {
  std::string config_file, out;
  std::vector<std::string> overrides;
  bool resume = false;
  Args args("train", "--config FILE --out RUN_DIR [--set KEY=VALUE ...] [--resume]",
            {flag(&config_file, "config", "FILE", "model + train + data config (YAML), e.g. configs/tiny-sink.yaml"),
             flag(&out, "out", "RUN_DIR", "run directory: metrics.jsonl, config.yaml, checkpoints/"),
             set_flag(&overrides),
             flag(&resume, "resume", "continue from the newest complete checkpoint in RUN_DIR (fresh start if none)")},
            argv);
  if (args.print_help_if_requested()) {
    if (!args.markdown_requested())
      std::cout << "\nmulti-process: mpirun -np N sinklm train ... (srun under Slurm; see scripts/slurm_train.sbatch)\n"
                   "SIGTERM or SIGUSR1 on any rank: checkpoint at the next step, exit 75; --resume continues\n";
    return 0;
  }
  Config config = Config::load_file(args.require("config"));
  config.apply_overrides(overrides);
  DistributedContext context("train");
  // From here a SIGTERM or SIGUSR1 is a request to checkpoint and stop, never a death (train/stop_signal.h).
  install_stop_signal_handlers();
  try {
    Trainer trainer(config, args.require("out"), resume, context);
    trainer.set_periodic_evaluation(zero_shot_evaluation(trainer.config(), trainer.tokenizer_files()));
    TrainSummary summary = trainer.run();
    if (context.is_root()) {
      nlohmann::json out = {{"steps", summary.steps}, {"loss", summary.last_loss}, {"tokens_per_s", summary.tokens_per_second},
                            {"checkpoint", summary.last_checkpoint}, {"ranks", context.world_size()}};
      if (!std::isnan(summary.validation.all)) out["val_loss"] = summary.validation.all;
      if (!std::isnan(summary.validation.matched)) out["val_loss_matched"] = summary.validation.matched;
      if (!summary.stopped_by.empty()) out["stopped_by"] = summary.stopped_by;
      std::cout << out.dump() << "\n";
    }
    if (!summary.stopped_by.empty()) return kPreemptedExitCode;
  } catch (const std::exception& e) {
    // One rank failing alone must not leave the others waiting in a collective.
    if (context.world_size() > 1) context.abort_job(str("rank ", context.rank(), ": ", e.what()));
    throw;
  }
  return 0;
}

}  // namespace sinklm
