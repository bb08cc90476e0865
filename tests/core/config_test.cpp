#include "core/config/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "../support/user_error_of.h"

namespace sinklm {
namespace {

std::string error_of(const std::function<void()>& body) { return testing_support::user_error_of(body); }

TEST(Config, DefaultsAreThePythia160mShape) {
  Config c;
  EXPECT_EQ(c.get_int("model.hidden_size"), 768);
  EXPECT_EQ(c.get_string("model.sink.mode"), "none");
  EXPECT_DOUBLE_EQ(c.get_float("model.layer_norm_eps"), 1e-5);
}

TEST(Config, UnknownKeyNamesFileAndSuggestsClosest) {
  auto msg = error_of([] { Config::from_yaml("model:\n  hiden_size: 64\n", "my.yaml"); });
  EXPECT_NE(msg.find("my.yaml"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'model.hiden_size'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'model.hidden_size'"), std::string::npos) << msg;
}

TEST(Config, UnknownSectionSuggestsClosest) {
  auto msg = error_of([] { Config::from_yaml("modle:\n  hidden_size: 64\n", "x.yaml"); });
  EXPECT_NE(msg.find("unknown section 'modle'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'model'"), std::string::npos) << msg;
}

TEST(Config, WrongTypeAndOutOfRangeAreRejected) {
  auto type = error_of([] { Config::from_yaml("model:\n  num_layers: twelve\n", "x.yaml"); });
  EXPECT_NE(type.find("'model.num_layers' must be an integer"), std::string::npos) << type;
  auto range = error_of([] { Config::from_yaml("model:\n  num_layers: 0\n", "x.yaml"); });
  EXPECT_NE(range.find("must be in [1, 1024]"), std::string::npos) << range;
  auto choice = error_of([] { Config::from_yaml("model:\n  sink:\n    mode: tokn\n", "x.yaml"); });
  EXPECT_NE(choice.find("did you mean 'token'"), std::string::npos) << choice;
  auto boolean = error_of([] { Config::from_yaml("model:\n  parallel_residual: maybe\n", "x.yaml"); });
  EXPECT_NE(boolean.find("true or false"), std::string::npos) << boolean;
  auto mapping = error_of([] { Config::from_yaml("model:\n  hidden_size:\n    a: 1\n", "x.yaml"); });
  EXPECT_NE(mapping.find("takes a value, not a mapping"), std::string::npos) << mapping;
  auto yaml = error_of([] { Config::from_yaml("model: [\n", "bad.yaml"); });
  EXPECT_NE(yaml.find("bad.yaml: invalid YAML"), std::string::npos) << yaml;
}

TEST(Config, OverridesValidateAndApply) {
  Config c;
  c.apply_overrides({"model.sink.mode=token", "model.num_layers=3"});
  EXPECT_EQ(c.get_string("model.sink.mode"), "token");
  EXPECT_EQ(c.get_int("model.num_layers"), 3);
  auto msg = error_of([&] { c.apply_overrides({"model.num_layer=3"}); });
  EXPECT_NE(msg.find("--set: unknown key 'model.num_layer' (did you mean 'model.num_layers'?)"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { c.apply_overrides({"novalue"}); }).find("expected key=value"), std::string::npos);
}

TEST(Config, InheritLoadsBaseThenOverlays) {
  auto dir = std::filesystem::temp_directory_path() / ("sinklm_cfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "base.yaml") << "model:\n  hidden_size: 64\n  num_heads: 4\n";
  std::ofstream(dir / "child.yaml") << "inherit: base.yaml\nmodel:\n  num_heads: 8\n";
  Config c = Config::load_file((dir / "child.yaml").string());
  EXPECT_EQ(c.get_int("model.hidden_size"), 64);
  EXPECT_EQ(c.get_int("model.num_heads"), 8);
  std::filesystem::remove_all(dir);
}

TEST(Config, YamlRoundTripKeepsEveryValue) {
  Config c = Config::from_yaml("model:\n  hidden_size: 96\n  sink:\n    mode: logit\n  rotary_pct: 0.5\n", "x.yaml");
  Config back = Config::from_yaml(c.to_yaml(), "roundtrip.yaml");
  for (const auto& spec : config_schema()) {
    switch (spec.type) {
      case ValueType::Int: EXPECT_EQ(back.get_int(spec.key), c.get_int(spec.key)) << spec.key; break;
      case ValueType::Float: EXPECT_DOUBLE_EQ(back.get_float(spec.key), c.get_float(spec.key)) << spec.key; break;
      case ValueType::Bool: EXPECT_EQ(back.get_bool(spec.key), c.get_bool(spec.key)) << spec.key; break;
      default: EXPECT_EQ(back.get_string(spec.key), c.get_string(spec.key)) << spec.key;
    }
  }
}

TEST(Config, MissingFileIsAUserError) {
  auto msg = error_of([] { Config::load_file("/nonexistent/x.yaml"); });
  EXPECT_NE(msg.find("/nonexistent/x.yaml: cannot open"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sinklm
