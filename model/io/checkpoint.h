// Checkpoints are directories in the Hugging Face GPT-NeoX layout, plus what sinklm needs to verify them:
//
//   config.json        Hugging Face GPTNeoXConfig (+ "sink" block), see model/io/hf_config.h
//   generation_config.json  bos/eos/pad ids for transformers' generate() (model/io/hf_config.h)
//   model.safetensors  tensors under Hugging Face names (gpt_neox.embed_in.weight, ..., embed_out.weight),
//                      F32, F16 or BF16; a projection's "<name>.weight" may instead be I8 [out, in] with
//                      "<name>.weight_scale" F32 [out, ceil(in / 32)] beside it (model/io/weight_format.h: W = q *
//                      scale per block of 32 inputs, written
//                      by `sinklm quantize`; transformers does not read such a file)
//   sinklm.yaml        the full sinklm config the model was built from
//   <extra files>      whatever the writer adds (the trainer: optimizer state, cursors, ...)
//   manifest.json      {"format": "sinklm-checkpoint", "version": 1,
//                       "files": {"<name>": {"bytes": n, "sha256": "<hex>"}, ...}}  (written last)
//
// A checkpoint is written into a staging directory, fsync'ed and renamed into place (core/files/atomic_dir.h).
// Loading verifies the manifest (size and sha256 of every file) before trusting anything, then checks every
// tensor's presence, shape and dtype. A directory saved by transformers' save_pretrained (no manifest,
// no sinklm.yaml; one model.safetensors or a model.safetensors.index.json with shards) loads too.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/files/atomic_dir.h"
#include "core/config/config.h"
#include "model/gpt_neox.h"
#include "model/io/weight_format.h"

namespace sinklm {

class CheckpointWriter {
 public:
  explicit CheckpointWriter(const std::string& dir, const std::string& staging_suffix = "");
  const std::string& staging_dir() const { return staging_.staging_dir(); }
  // Writes config.json, model.safetensors (parameters in `dtype`; those named in `int8_weights` as int8 rows
  // with their scales, see above) and sinklm.yaml into the staging dir.
  void add_model(const Config& config, GPTNeoXForCausalLM& model, torch::ScalarType dtype = torch::kFloat32,
                 const std::set<std::string>& int8_weights = {});
  // Writes one more file: `write` receives the staging path to create.
  void add_file(const std::string& name, const std::function<void(const std::string& path)>& write);
  // Lists a file another process already wrote (durably) into staging_dir().
  void adopt_file(const std::string& name);
  void commit();  // manifest.json, then the atomic rename

 private:
  AtomicDirWriter staging_;
  std::vector<std::string> files_;
};

void save_checkpoint(const std::string& dir, const Config& config, GPTNeoXForCausalLM& model,
                     torch::ScalarType dtype = torch::kFloat32);

// Verifies manifest.json (if any): every listed file exists with the recorded size and sha256.
void verify_checkpoint_files(const std::string& dir);
// The config of a checkpoint: sinklm.yaml if present, else converted from config.json.
Config load_checkpoint_config(const std::string& dir);

// Parameter name -> the format it is stored in (F32, F16: fp32; BF16: bf16; I8 + scale: int8).
using StoredFormats = std::map<std::string, WeightFormat>;

struct LoadedModel {
  Config config;
  GPTNeoXForCausalLM model{nullptr};
  StoredFormats stored;  // every parameter's
};
// Verifies and loads a checkpoint into float32 parameters on `device`. `overrides` (key=value) apply to
// run-time keys such as model.attention.
LoadedModel load_checkpoint(const std::string& dir, torch::Device device = torch::kCPU,
                            const std::vector<std::string>& overrides = {});

// Copies tensors from the checkpoint's safetensors file(s) into `model` (float32 parameters: int8 rows
// dequantized) and says how each was stored; every parameter must be present with the right shape and a float
// dtype, or int8 with its scale. Known non-parameter buffers saved by older transformers (attention.bias,
// attention.masked_bias, rotary_emb.inv_freq) are ignored; any other tensor is an error.
StoredFormats load_model_tensors(const std::string& dir, GPTNeoXForCausalLM& model);

}  // namespace sinklm
