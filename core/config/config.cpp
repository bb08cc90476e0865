#include "core/config/config.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/config/text_distance.h"

namespace sinklm {
namespace {

std::vector<std::string> all_keys() {
  std::vector<std::string> keys;
  for (const auto& spec : config_schema()) keys.push_back(spec.key);
  return keys;
}

bool is_section(const std::string& prefix) {
  for (const auto& spec : config_schema())
    if (spec.key.rfind(prefix + ".", 0) == 0) return true;
  return false;
}

std::vector<std::string> sections() {
  std::set<std::string> out;
  for (const auto& spec : config_schema()) {
    for (size_t dot = spec.key.find('.'); dot != std::string::npos; dot = spec.key.find('.', dot + 1))
      out.insert(spec.key.substr(0, dot));
  }
  return {out.begin(), out.end()};
}

bool parse_int(const std::string& text, int64_t* out) {
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used, 10);
    if (used != text.size()) return false;
    *out = v;
    return true;
  } catch (...) {
    return false;
  }
}

bool parse_float(const std::string& text, double* out) {
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(v)) return false;
    *out = v;
    return true;
  } catch (...) {
    return false;
  }
}

bool parse_bool(const std::string& text, bool* out) {
  static const std::set<std::string> yes = {"true", "True", "yes", "on", "1"};
  static const std::set<std::string> no = {"false", "False", "no", "off", "0"};
  if (yes.count(text)) *out = true;
  else if (no.count(text)) *out = false;
  else return false;
  return true;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string range_text(const KeySpec& spec) {
  auto bound = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  return "[" + (std::isinf(spec.min) ? std::string("-inf") : bound(spec.min)) + ", " +
         (std::isinf(spec.max) ? std::string("inf") : bound(spec.max)) + "]";
}

// Throws a UserError unless `value` is valid for `spec`; returns the canonical text to store.
std::string validate(const KeySpec& spec, const std::string& value, const std::string& origin) {
  auto bad = [&](const std::string& why) {
    fail(origin, ": key '", spec.key, "' ", why, ", got '", value, "' (", spec.help, ")");
  };
  switch (spec.type) {
    case ValueType::Int: {
      int64_t v;
      if (!parse_int(value, &v)) bad("must be an integer");
      if (v < spec.min || v > spec.max) bad("must be in " + range_text(spec));
      return std::to_string(v);
    }
    case ValueType::Float: {
      double v;
      if (!parse_float(value, &v)) bad("must be a number");
      if (v < spec.min || v > spec.max) bad("must be in " + range_text(spec));
      return value;
    }
    case ValueType::Bool: {
      bool v;
      if (!parse_bool(value, &v)) bad("must be true or false");
      return v ? "true" : "false";
    }
    case ValueType::Choice:
      SINKLM_ASSERT(!spec.choices.empty(), spec.key, ": its choices come from a library that is not linked in ",
                    "(core/config/config.h: provide_choices)");
      for (const auto& choice : spec.choices)
        if (choice == value) return value;
      bad("must be one of {" + join(spec.choices, ", ") + "}" + did_you_mean(value, spec.choices));
    case ValueType::String:
      return value;
  }
  SINKLM_ASSERT(false, "unhandled ValueType");
}

void flatten(const YAML::Node& node, const std::string& prefix, const std::string& origin,
             std::vector<std::pair<std::string, std::string>>* out) {
  for (const auto& item : node) {
    std::string name = item.first.as<std::string>();
    std::string key = prefix.empty() ? name : prefix + "." + name;
    const YAML::Node& value = item.second;
    if (value.IsMap()) {
      if (find_key_spec(key)) fail(origin, ": key '", key, "' takes a value, not a mapping");
      if (!is_section(key)) fail(origin, ": unknown section '", key, "'", did_you_mean(key, sections()));
      flatten(value, key, origin, out);
    } else if (value.IsScalar()) {
      if (!find_key_spec(key)) {
        if (is_section(key)) fail(origin, ": '", key, "' is a section; give it a mapping of keys");
        fail(origin, ": unknown key '", key, "'", did_you_mean(key, all_keys()));
      }
      out->emplace_back(key, value.Scalar());
    } else {
      fail(origin, ": key '", key, "' must be a scalar value (lists and nulls are not accepted here)");
    }
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open config file (does it exist? presets live in configs/)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

const KeySpec* find_key_spec(const std::string& key) {
  for (const auto& spec : config_schema())
    if (spec.key == key) return &spec;
  return nullptr;
}

Config::Config() {
  for (const auto& spec : config_schema()) values_[spec.key] = spec.default_value;
}

Config Config::load_file(const std::string& path) {
  Config config;
  config.merge_yaml(read_text_file(path), path, std::filesystem::path(path).parent_path().string(), 0);
  config.source_ = path;
  return config;
}

Config Config::from_yaml(const std::string& yaml_text, const std::string& source_name) {
  Config config;
  config.merge_yaml(yaml_text, source_name, ".", 0);
  config.source_ = source_name;
  return config;
}

void Config::merge_yaml(const std::string& yaml_text, const std::string& source_name, const std::string& base_dir,
                        int depth) {
  if (depth > 8) fail(source_name, ": 'inherit' chain deeper than 8 files (a cycle?)");
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    fail(source_name, ": invalid YAML at line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) fail(source_name, ": top level must be a mapping of sections (model:, train:, ...)");
  if (root["inherit"]) {
    if (!root["inherit"].IsScalar()) fail(source_name, ": 'inherit' must be a file name");
    std::string base = (std::filesystem::path(base_dir) / root["inherit"].as<std::string>()).string();
    merge_yaml(read_text_file(base), base, std::filesystem::path(base).parent_path().string(), depth + 1);
    root.remove("inherit");
  }
  std::vector<std::pair<std::string, std::string>> assignments;
  flatten(root, "", source_name, &assignments);
  for (const auto& [key, value] : assignments) set(key, value, source_name);
}

void Config::set(const std::string& key, const std::string& value, const std::string& origin) {
  const KeySpec* spec = find_key_spec(key);
  if (!spec) fail(origin, ": unknown key '", key, "'", did_you_mean(key, all_keys()));
  values_[key] = validate(*spec, value, origin);
}

void Config::apply_overrides(const std::vector<std::string>& assignments) {
  for (const auto& assignment : assignments) {
    size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0)
      fail("--set ", assignment, ": expected key=value, e.g. --set model.sink.mode=token");
    set(assignment.substr(0, eq), assignment.substr(eq + 1), "--set");
  }
}

const std::string& Config::raw(const std::string& key, ValueType expected) const {
  const KeySpec* spec = find_key_spec(key);
  SINKLM_ASSERT(spec, "config key not in schema: ", key);
  bool string_like = expected == ValueType::String && spec->type == ValueType::Choice;
  SINKLM_ASSERT(spec->type == expected || string_like, "config key read with the wrong type: ", key);
  return values_.at(key);
}

int64_t Config::get_int(const std::string& key) const { return std::stoll(raw(key, ValueType::Int)); }
double Config::get_float(const std::string& key) const { return std::stod(raw(key, ValueType::Float)); }
bool Config::get_bool(const std::string& key) const { return raw(key, ValueType::Bool) == "true"; }
const std::string& Config::get_string(const std::string& key) const { return raw(key, ValueType::String); }
const std::string& Config::text(const std::string& key) const {
  SINKLM_ASSERT(find_key_spec(key), "config key not in schema: ", key);
  return values_.at(key);
}

std::string Config::to_yaml() const {
  // Keys are emitted in schema order; a new section starts whenever the dotted prefix changes.
  std::ostringstream out;
  std::vector<std::string> open;  // currently open section path
  for (const auto& spec : config_schema()) {
    std::vector<std::string> parts;
    std::stringstream split(spec.key);
    for (std::string part; std::getline(split, part, '.');) parts.push_back(part);
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) ++common;
    open.resize(common);
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      out << std::string(2 * i, ' ') << parts[i] << ":\n";
      open.push_back(parts[i]);
    }
    const std::string& value = values_.at(spec.key);
    bool quote = spec.type == ValueType::String;
    out << std::string(2 * open.size(), ' ') << parts.back() << ": "
        << (quote ? YAML::Dump(YAML::Node(value)) : value) << "  # " << spec.help << "\n";
  }
  return out.str();
}

}  // namespace sinklm
