#include <cmath>
#include <iostream>

#include "core/args.h"
#include "core/error.h"
#include "cli/commands.h"
#include "train/trainer.h"

namespace sinklm {

int run_train_command(const std::vector<std::string>& argv) {
  Args args("train", "--config FILE --out RUN_DIR [--set KEY=VALUE ...] [--resume]",
            {{"config", "FILE", "model + train + data config (YAML), e.g. configs/tiny-sink.yaml"},
             {"out", "RUN_DIR", "run directory: metrics.jsonl, config.yaml, checkpoints/"},
             {"set", "KEY=VALUE", "override a config key (repeatable)"},
             {"resume", "", "continue from the newest complete checkpoint in RUN_DIR (fresh start if none)"}},
            argv);
  if (args.help_requested()) {
    std::cout << args.usage() << "\nmulti-process: mpirun -np N sinklm train ... (srun under Slurm; see scripts/slurm_train.sbatch)\n";
    return 0;
  }
  Config config = Config::load_file(args.require("config"));
  config.apply_overrides(args.get_all("set"));
  DistributedContext context("train");
  try {
    Trainer trainer(config, args.require("out"), args.has("resume"), context);
    TrainSummary summary = trainer.run();
    if (context.is_root()) {
      nlohmann::json out = {{"steps", summary.steps}, {"loss", summary.last_loss}, {"tokens_per_s", summary.tokens_per_second},
                            {"checkpoint", summary.last_checkpoint}, {"ranks", context.world_size()}};
      if (!std::isnan(summary.validation_loss)) out["val_loss"] = summary.validation_loss;
      std::cout << out.dump() << "\n";
    }
  } catch (const std::exception& e) {
    // One rank failing alone must not leave the others waiting in a collective.
    if (context.world_size() > 1) context.abort_job(str("rank ", context.rank(), ": ", e.what()));
    throw;
  }
  return 0;
}

}  // namespace sinklm
