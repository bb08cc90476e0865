#include "model/io/checkpoint.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/ends_with.h"
#include "core/error.h"
#include "core/files/sha256.h"
#include "model/io/hf_config.h"
#include "model/io/safetensors.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kManifestFormat = "sinklm-checkpoint";
constexpr int kManifestVersion = 1;
constexpr const char* kScaleSuffix = "_scale";  // "<name>.weight_scale" beside an int8 "<name>.weight"

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
}

bool is_ignored_hf_buffer(const std::string& name) {
  for (const char* suffix : {".attention.bias", ".attention.masked_bias", ".rotary_emb.inv_freq"})
    if (name.size() > std::strlen(suffix) && name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
      return true;
  return false;
}

// The safetensors files of a checkpoint: model.safetensors, or the shards named by the HF index.
std::vector<std::string> safetensors_files(const std::string& dir) {
  std::string single = dir + "/model.safetensors";
  if (fs::exists(single)) return {single};
  std::string index = dir + "/model.safetensors.index.json";
  if (!fs::exists(index))
    fail(dir, ": no model.safetensors (or model.safetensors.index.json); is this a checkpoint directory? "
              "(pytorch_model.bin checkpoints must be converted to safetensors first)");
  std::set<std::string> shards;
  nlohmann::json json = read_json_file(index);
  if (!json.contains("weight_map") || !json["weight_map"].is_object()) fail(index, ": missing object 'weight_map'");
  for (auto& [name, file] : json["weight_map"].items()) shards.insert(dir + "/" + file.get<std::string>());
  return {shards.begin(), shards.end()};
}

}  // namespace

CheckpointWriter::CheckpointWriter(const std::string& dir, const std::string& staging_suffix)
    : staging_(dir, staging_suffix) {}

void CheckpointWriter::add_file(const std::string& name, const std::function<void(const std::string& path)>& write) {
  write(staging_.staging_path(name));
  adopt_file(name);
}

void CheckpointWriter::adopt_file(const std::string& name) {
  SINKLM_ASSERT(name != kManifest && std::find(files_.begin(), files_.end(), name) == files_.end(), "file ", name);
  SINKLM_ASSERT(fs::exists(staging_.staging_path(name)), "adopted file not written: ", name);
  files_.push_back(name);
}

void CheckpointWriter::add_model(const Config& config, GPTNeoXForCausalLM& model, torch::ScalarType dtype,
                                 const std::set<std::string>& int8_weights) {
  add_file("config.json", [&](const std::string& path) {
    write_file_durable(path, hf_config_json(model->config()).dump(2) + "\n");
  });
  add_file("generation_config.json", [&](const std::string& path) {
    write_file_durable(path, hf_generation_config_json(model->config()).dump(2) + "\n");
  });
  add_file("model.safetensors", [&](const std::string& path) {
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& item : model->named_parameters()) {
      if (!int8_weights.count(item.key())) {
        tensors.emplace_back(item.key(), item.value().to(dtype));
        continue;
      }
      const Int8Weight w = quantize_int8(item.value());
      tensors.emplace_back(item.key(), w.q);                            // [out, in] int8
      tensors.emplace_back(item.key() + kScaleSuffix, w.scale);  // [out, ceil(in / 32)] float32
    }
    write_safetensors(path, tensors, {{"format", "pt"}});
  });
  add_file("sinklm.yaml", [&](const std::string& path) {
    write_file_durable(path, "# sinklm config of this checkpoint (complete: every key, defaults included)\n" +
                                 config.to_yaml());
  });
}

void CheckpointWriter::commit() {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& name : files_) {
    std::string path = staging_.staging_path(name);
    files[name] = {{"bytes", fs::file_size(path)}, {"sha256", sha256_file(path)}};
  }
  nlohmann::json manifest = {{"format", kManifestFormat}, {"version", kManifestVersion}, {"files", files}};
  write_file_durable(staging_.staging_path(kManifest), manifest.dump(2) + "\n");
  staging_.commit();
}

void save_checkpoint(const std::string& dir, const Config& config, GPTNeoXForCausalLM& model, torch::ScalarType dtype) {
  CheckpointWriter writer(dir);
  writer.add_model(config, model, dtype);
  writer.commit();
}

void verify_checkpoint_files(const std::string& dir) {
  if (!fs::is_directory(dir)) fail(dir, ": not a checkpoint directory (does not exist)");
  std::string manifest_path = dir + "/" + kManifest;
  if (!fs::exists(manifest_path)) {
    if (fs::exists(dir + "/sinklm.yaml"))
      fail(dir, ": incomplete sinklm checkpoint (sinklm.yaml but no manifest.json): it was not fully written; "
                "use an earlier checkpoint");
    return;  // a plain Hugging Face directory: nothing to verify against
  }
  nlohmann::json manifest = read_json_file(manifest_path);
  if (manifest.value("format", "") != kManifestFormat || !manifest.contains("files") || !manifest["files"].is_object())
    fail(manifest_path, ": not a sinklm checkpoint manifest (needs format \"", kManifestFormat, "\" and files)");
  if (manifest.value("version", 0) > kManifestVersion)
    fail(manifest_path, ": manifest version ", manifest["version"].dump(), " is newer than this sinklm (",
         kManifestVersion, "); upgrade sinklm");
  for (auto& [name, info] : manifest["files"].items()) {
    std::string path = dir + "/" + name;
    if (!fs::exists(path)) fail(path, ": missing (listed in manifest.json)");
    uint64_t bytes = info.value("bytes", uint64_t{0});
    if (fs::file_size(path) != bytes)
      fail(path, ": size ", fs::file_size(path), " bytes, manifest.json says ", bytes, ": the file is truncated or replaced");
    std::string expected = info.value("sha256", std::string());
    std::string actual = sha256_file(path);
    if (actual != expected)
      fail(path, ": sha256 mismatch (manifest ", expected, ", file ", actual,
           "): the file is corrupted; restore it from a copy or use another checkpoint");
  }
}

Config load_checkpoint_config(const std::string& dir) {
  verify_checkpoint_files(dir);
  std::string yaml = dir + "/sinklm.yaml";
  if (fs::exists(yaml)) return Config::load_file(yaml);
  std::string json = dir + "/config.json";
  if (!fs::exists(json)) fail(dir, ": no sinklm.yaml or config.json; is this a checkpoint directory?");
  return config_from_hf_json(read_json_file(json), json);
}

namespace {

// An int8 entry's float32 [out, in] values, q * scale, its block scales read from the entry beside it.
torch::Tensor dequantized_entry(const SafetensorsFile& file, const std::string& name, const std::string& where) {
  const std::string scale_name = name + kScaleSuffix;
  if (!file.contains(scale_name))
    fail(where, ": int8 weight without its scale '", scale_name, "' in the same file (written by sinklm quantize?)");
  Int8Weight w{file.view(name), file.view(scale_name)};
  const int64_t rows = w.q.dim() == 2 ? w.q.size(0) : 0, blocks = w.q.dim() == 2 ? (w.q.size(1) + kInt8Block - 1) / kInt8Block : 0;
  if (w.q.dim() != 2 || w.scale.sizes() != torch::IntArrayRef({rows, blocks}) || w.scale.scalar_type() != torch::kFloat32)
    fail(where, ": int8 weight ", w.q.sizes(), " needs an F32 scale of [", rows, ", ", blocks, "] (one per ",
         kInt8Block, " inputs of a row), found ", w.scale.sizes(), " ", file.entries().at(scale_name).dtype);
  if (!(w.scale > 0).all().item<bool>() || !torch::isfinite(w.scale).all().item<bool>())
    fail(file.path(), ": tensor '", scale_name, "': every scale must be finite and positive (the scales of '", name, "')");
  return dequantize_int8(w);
}

WeightFormat stored_format(torch::ScalarType type) {
  return type == torch::kInt8 ? WeightFormat::Int8 : type == torch::kBFloat16 ? WeightFormat::Bf16 : WeightFormat::Fp32;
}

}  // namespace

StoredFormats load_model_tensors(const std::string& dir, GPTNeoXForCausalLM& model) {
  torch::NoGradGuard no_grad;
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  for (const auto& path : safetensors_files(dir)) files.push_back(std::make_unique<SafetensorsFile>(path));
  auto params = model->named_parameters();
  StoredFormats stored;
  for (const auto& file : files) {
    for (const auto& [name, entry] : file->entries()) {
      const std::string where = file->path() + ": tensor '" + name + "'";
      torch::Tensor* param = params.find(name);
      if (!param) {
        const std::string base = name.substr(0, name.size() - std::min(name.size(), std::strlen(kScaleSuffix)));
        const bool scale_of_int8 =
            ends_with(name, kScaleSuffix) && file->contains(base) && file->entries().at(base).dtype == "I8";
        if (scale_of_int8 || is_ignored_hf_buffer(name)) continue;
        fail(where, ": not a parameter of this model (config: ", sink_mode_name(model->config().sink_mode),
             " sink, ", model->config().num_layers, " layers); wrong config for this checkpoint?");
      }
      auto source = file->view(name);
      const bool int8 = source.scalar_type() == torch::kInt8;
      if (!source.is_floating_point() && !int8)
        fail(where, ": dtype ", entry.dtype, " is not a float type (expected F32, F16 or BF16, or I8 with a scale)");
      if (source.sizes() != param->sizes())
        fail(where, ": shape ", source.sizes(), " but the model expects ", param->sizes());
      if (!stored.emplace(name, stored_format(source.scalar_type())).second) fail(where, ": appears in more than one shard");
      param->copy_(int8 ? dequantized_entry(*file, name, where) : source);
    }
  }
  for (const auto& item : params)
    if (!stored.count(item.key()))
      fail(dir, ": missing tensor '", item.key(), "' in model.safetensors (checkpoint incomplete or of another "
                "architecture/sink mode)");
  return stored;
}

LoadedModel load_checkpoint(const std::string& dir, torch::Device device, const std::vector<std::string>& overrides) {
  LoadedModel out;
  out.config = load_checkpoint_config(dir);
  out.config.apply_overrides(overrides);
  out.model = GPTNeoXForCausalLM(ModelConfig::from(out.config), InitialWeights::Loaded);
  out.stored = load_model_tensors(dir, out.model);  // every parameter, or it fails
  out.model->to(device);
  return out;
}

}  // namespace sinklm
