// TensorBoard's event files, written by the trainer itself (no TensorFlow): `tensorboard --logdir RUN_DIR`
// shows a run live, and W&B's `wandb.tensorboard.patch` / `sync_tensorboard=True` uploads the same files.
// Every metrics.jsonl record becomes scalars at its step: a number under its key, a list (one value per layer)
// as key/layer_<i>, objects (per-source token counts) as key/<name>; booleans and text are left to metrics.jsonl.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>

namespace sinklm {

class TensorBoardEvents {
 public:
  // Opens <dir>/events.out.tfevents.<unix seconds>.<host>.<pid> (a new file per start). `first_step` is the
  // step a resumed run continues from: a SessionLog START there makes TensorBoard drop what an earlier,
  // interrupted start logged past it, as metrics.jsonl does.
  TensorBoardEvents(const std::string& dir, int64_t first_step);
  void add_scalars(const nlohmann::json& record);  // needs "step"; flushed at once

 private:
  void write_event(const std::string& event);  // one record: framing and checksums below
  std::string path_;
  std::ofstream out_;
};

}  // namespace sinklm
