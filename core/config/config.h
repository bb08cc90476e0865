// sinklm configuration: one flat, validated map from dotted keys ("model.sink.mode") to values.
// Every key is declared once in core/config/config_schema.cpp with its type, range and default; a YAML file or a
// `--set key=value` override that names an unknown key, has the wrong type or is out of range is rejected
// with a message naming the file (or "--set") and the key, and the closest valid key.
//
// YAML form: nested mappings; an optional top-level `inherit: other.yaml` (relative to the file) loads a
// base preset first, so a sink variant of a preset only lists what differs.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sinklm {

enum class ValueType { Int, Float, Bool, String, Choice };

struct KeySpec {
  std::string key;
  ValueType type;
  std::string default_value;
  std::string help;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices;  // ValueType::Choice only
};

const std::vector<KeySpec>& config_schema();
const KeySpec* find_key_spec(const std::string& key);

// A choice key whose list belongs to a library above core (model.sink.mode: the table of model/sink.cpp) is
// declared in the schema by its key alone; that library fills in its choices, in order, the first being
// the default, and its help ("<choice> = <summary>; ...") when it is linked in, before main runs.
void provide_choices(const std::string& key, const std::vector<std::pair<std::string, std::string>>& choices);

class Config {
 public:
  Config();  // every key at its default
  static Config load_file(const std::string& path);
  static Config from_yaml(const std::string& yaml_text, const std::string& source_name);

  // Validates and stores `value` (YAML scalar text). `origin` names where it came from, for errors.
  void set(const std::string& key, const std::string& value, const std::string& origin);
  // Each assignment is "key=value" (the command line's --set).
  void apply_overrides(const std::vector<std::string>& assignments);

  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;  // String and Choice keys
  const std::string& text(const std::string& key) const;        // any key, as canonical text

  std::string to_yaml() const;  // every key, nested, with the schema's help as comments
  const std::string& source() const { return source_; }
  void set_source(std::string source) { source_ = std::move(source); }

 private:
  void merge_yaml(const std::string& yaml_text, const std::string& source_name, const std::string& base_dir,
                  int depth);
  const std::string& raw(const std::string& key, ValueType expected) const;

  std::map<std::string, std::string> values_;
  std::string source_ = "defaults";
};

}  // namespace sinklm
