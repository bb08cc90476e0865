// Checkpoints: safetensors round trips in every float dtype, save -> load gives identical logits, and
// every kind of damage is a clear error that names the file and the tensor.
#include "model/io/checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "model/io/safetensors.h"
#include "model_test_support.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

using testing_support::random_ids;
using testing_support::tiny_config;
using testing_support::user_error_of;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sinklm_ckpt_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string path(const std::string& name) const { return (root_ / name).string(); }

  // Saves a tiny model and returns its directory.
  std::string saved(const std::string& mode, torch::ScalarType dtype = torch::kFloat32) {
    Config config = tiny_config(mode);
    GPTNeoXForCausalLM model(ModelConfig::from(config));
    std::string dir = path("ckpt-" + mode);
    save_checkpoint(dir, config, model, dtype);
    return dir;
  }

  // Rewrites model.safetensors of a manifest-free copy of `dir` with `edit` applied to the tensor list.
  std::string tampered(const std::string& dir,
                       const std::function<void(std::vector<std::pair<std::string, torch::Tensor>>&)>& edit) {
    std::string copy = dir + "-tampered";
    fs::create_directories(copy);
    fs::copy_file(dir + "/config.json", copy + "/config.json");
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    {
      SafetensorsFile file(dir + "/model.safetensors");
      for (const auto& [name, entry] : file.entries()) tensors.emplace_back(name, file.view(name).clone());
    }
    edit(tensors);
    write_safetensors(copy + "/model.safetensors", tensors);
    return copy;
  }

  fs::path root_;
};

TEST_F(CheckpointTest, SafetensorsRoundTripEveryDtype) {
  torch::manual_seed(1);
  auto base = torch::randn({3, 5});
  std::vector<std::pair<std::string, torch::Tensor>> tensors = {
      {"f32", base}, {"f16", base.to(torch::kFloat16)}, {"bf16", base.to(torch::kBFloat16)},
      {"i64", torch::arange(7)}, {"scalar", torch::tensor(2.5)}};
  write_safetensors(path("t.safetensors"), tensors, {{"format", "pt"}});
  SafetensorsFile file(path("t.safetensors"));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  for (const auto& [name, t] : tensors) {
    auto back = file.view(name);
    EXPECT_EQ(back.scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(back, t)) << name;
  }
  EXPECT_EQ(file.entries().at("bf16").dtype, "BF16");
}

TEST_F(CheckpointTest, SaveThenLoadGivesIdenticalLogitsForEveryVariant) {
  for (const std::string& mode : testing_support::sink_mode_names()) {
    Config config = tiny_config(mode);
    GPTNeoXForCausalLM model(ModelConfig::from(config));
    testing_support::randomize_sink_parameters(model);  // non-trivial, so the test can see them load
    std::string dir = path(std::string("m-") + mode);
    save_checkpoint(dir, config, model);
    for (const char* file : {"config.json", "model.safetensors", "sinklm.yaml", "manifest.json"})
      EXPECT_TRUE(fs::exists(dir + "/" + file)) << file;
    LoadedModel loaded = load_checkpoint(dir);
    EXPECT_EQ(loaded.model->config().sink_mode, model->config().sink_mode);
    auto ids = random_ids(2, 9, 60);
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(model->forward(ids), loaded.model->forward(ids))) << mode;
  }
}

TEST_F(CheckpointTest, HalfPrecisionCheckpointsLoad) {
  for (auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    std::string dir = saved("none", dtype);
    SafetensorsFile file(dir + "/model.safetensors");
    EXPECT_EQ(file.view("embed_out.weight").scalar_type(), dtype);
    LoadedModel loaded = load_checkpoint(dir);
    EXPECT_EQ(loaded.model->embed_out->weight.scalar_type(), torch::kFloat32);
    EXPECT_EQ(loaded.stored.at("embed_out.weight"), dtype == torch::kBFloat16 ? WeightFormat::Bf16 : WeightFormat::Fp32);
    fs::remove_all(dir);
  }
}

// An int8 checkpoint (as sinklm quantize writes one): the named weights stored I8 with an F32 scale, loaded
// as their dequantized values, every parameter's stored format reported; the rest stays float32.
TEST_F(CheckpointTest, Int8WeightsRoundTripWithTheirScales) {
  Config config = tiny_config("none");
  GPTNeoXForCausalLM model(ModelConfig::from(config));
  const std::string qkv = "gpt_neox.layers.0.attention.query_key_value.weight";
  const std::string dir = path("int8");
  {
    CheckpointWriter writer(dir);
    writer.add_model(config, model, torch::kFloat32, {qkv, "embed_out.weight"});
    writer.commit();
  }
  SafetensorsFile file(dir + "/model.safetensors");
  EXPECT_EQ(file.view(qkv).scalar_type(), torch::kInt8);
  EXPECT_EQ(file.view(qkv + "_scale").sizes(), torch::IntArrayRef({3 * 32, 1}));  // hidden 32: one block per row
  EXPECT_EQ(file.view("gpt_neox.layers.0.attention.dense.weight").scalar_type(), torch::kFloat32);
  LoadedModel loaded = load_checkpoint(dir);
  EXPECT_EQ(loaded.stored.at(qkv), WeightFormat::Int8);
  EXPECT_EQ(loaded.stored.at("embed_out.weight"), WeightFormat::Int8);
  EXPECT_EQ(loaded.stored.at("gpt_neox.layers.0.attention.dense.weight"), WeightFormat::Fp32);
  const auto original = model->named_parameters()[qkv];
  const auto expected = dequantize_int8(quantize_int8(original));
  EXPECT_TRUE(torch::equal(loaded.model->named_parameters()[qkv], expected));
  EXPECT_TRUE(torch::equal(loaded.model->named_parameters()["gpt_neox.layers.0.attention.dense.weight"],
                           model->named_parameters()["gpt_neox.layers.0.attention.dense.weight"]));
}

TEST_F(CheckpointTest, Int8WeightWithoutAValidScaleIsNamed) {
  Config config = tiny_config("none");
  GPTNeoXForCausalLM model(ModelConfig::from(config));
  const std::string head = "embed_out.weight";
  {
    CheckpointWriter writer(path("int8"));
    writer.add_model(config, model, torch::kFloat32, {head});
    writer.commit();
  }
  auto without = tampered(path("int8"), [&](auto& tensors) {
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [&](auto& t) { return t.first == head + "_scale"; }),
                  tensors.end());
  });
  auto msg = user_error_of([&] { load_checkpoint(without); });
  EXPECT_NE(msg.find("tensor 'embed_out.weight': int8 weight without its scale 'embed_out.weight_scale'"), std::string::npos) << msg;
  fs::remove_all(without);
  auto negative = tampered(path("int8"), [&](auto& tensors) {
    for (auto& [name, t] : tensors)
      if (name == head + "_scale") t[0][0] = -1.0f;
  });
  msg = user_error_of([&] { load_checkpoint(negative); });
  EXPECT_NE(msg.find("tensor 'embed_out.weight_scale': every scale must be finite and positive"), std::string::npos) << msg;
  fs::remove_all(negative);
  auto wide = tampered(path("int8"), [&](auto& tensors) {
    for (auto& [name, t] : tensors)
      if (name == head + "_scale") t = torch::ones({3});
  });
  msg = user_error_of([&] { load_checkpoint(wide); });
  EXPECT_NE(msg.find("needs an F32 scale of [64, 1] (one per 32 inputs of a row), found [3]"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, FlippedByteIsDetectedByTheManifest) {
  std::string dir = saved("none");
  {
    std::fstream f(dir + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(c ^ 0x01));
  }
  auto msg = user_error_of([&] { load_checkpoint(dir); });
  EXPECT_NE(msg.find("model.safetensors: sha256 mismatch"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, TruncatedFileIsDetected) {
  std::string dir = saved("none");
  fs::resize_file(dir + "/model.safetensors", fs::file_size(dir + "/model.safetensors") - 10);
  auto msg = user_error_of([&] { load_checkpoint(dir); });
  EXPECT_NE(msg.find("model.safetensors: size"), std::string::npos) << msg;
  fs::remove(dir + "/manifest.json");
  fs::remove(dir + "/sinklm.yaml");
  msg = user_error_of([&] { load_checkpoint(dir); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, MissingManifestOnASinklmCheckpointMeansIncomplete) {
  std::string dir = saved("none");
  fs::remove(dir + "/manifest.json");
  auto msg = user_error_of([&] { load_checkpoint(dir); });
  EXPECT_NE(msg.find("incomplete sinklm checkpoint"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, MissingTensorIsNamed) {
  std::string dir = tampered(saved("none"), [](auto& tensors) {
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                 [](auto& t) { return t.first == "gpt_neox.layers.1.mlp.dense_4h_to_h.bias"; }),
                  tensors.end());
  });
  auto msg = user_error_of([&] { load_checkpoint(dir); });
  EXPECT_NE(msg.find("missing tensor 'gpt_neox.layers.1.mlp.dense_4h_to_h.bias'"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, WrongShapeIsNamed) {
  std::string dir = tampered(saved("none"), [](auto& tensors) {
    for (auto& [name, t] : tensors)
      if (name == "gpt_neox.final_layer_norm.weight") t = torch::ones({31});
  });
  auto msg = user_error_of([&] { load_checkpoint(dir); });
  EXPECT_NE(msg.find("tensor 'gpt_neox.final_layer_norm.weight': shape [31] but the model expects [32]"),
            std::string::npos)
      << msg;
}

TEST_F(CheckpointTest, WrongDtypeIsNamed) {
  std::string dir = tampered(saved("none"), [](auto& tensors) {
    for (auto& [name, t] : tensors)
      if (name == "embed_out.weight") t = t.to(torch::kInt64);
  });
  auto msg = user_error_of([&] { load_checkpoint(dir); });
  EXPECT_NE(msg.find("tensor 'embed_out.weight': dtype I64 is not a float type"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, UnexpectedTensorIsAnErrorButOldHfBuffersAreIgnored) {
  std::string base = saved("none");
  std::string ok = tampered(base, [](auto& tensors) {
    tensors.emplace_back("gpt_neox.layers.0.attention.rotary_emb.inv_freq", torch::ones({4}));
    tensors.emplace_back("gpt_neox.layers.0.attention.masked_bias", torch::tensor(-1e9));
  });
  EXPECT_NO_THROW(load_checkpoint(ok));
  fs::remove_all(ok);
  std::string bad = tampered(base, [](auto& tensors) { tensors.emplace_back("gpt_neox.extra.weight", torch::ones({2})); });
  auto msg = user_error_of([&] { load_checkpoint(bad); });
  EXPECT_NE(msg.find("tensor 'gpt_neox.extra.weight': not a parameter of this model"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, CorruptHeaderIsDetected) {
  std::string file = path("bad.safetensors");
  std::ofstream(file, std::ios::binary) << std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10);
  auto msg = user_error_of([&] { SafetensorsFile f(file); });
  EXPECT_NE(msg.find("corrupt safetensors header length"), std::string::npos) << msg;
  std::string json = "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 8]}}";
  uint64_t n = json.size();
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << json << std::string(16, '\0');
  out.close();
  msg = user_error_of([&] { SafetensorsFile f(file); });
  EXPECT_NE(msg.find("tensor 'a': data_offsets span 8 bytes but dtype F32 and its shape need 16"), std::string::npos) << msg;
}

TEST_F(CheckpointTest, ResavingReplacesAtomically) {
  std::string dir = saved("none");
  Config config = tiny_config("logit");
  GPTNeoXForCausalLM model(ModelConfig::from(config));
  save_checkpoint(dir, config, model);
  EXPECT_EQ(load_checkpoint_config(dir).get_string("model.sink.mode"), "logit");
  for (const auto& entry : fs::directory_iterator(root_))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
}

}  // namespace
}  // namespace sinklm
