#include "core/config/config_reference.h"

#include <cmath>
#include <sstream>

#include "core/config/config.h"

namespace sinklm {
namespace {

const char* type_name(ValueType type) {
  switch (type) {
    case ValueType::Int: return "integer";
    case ValueType::Float: return "number";
    case ValueType::Bool: return "boolean";
    case ValueType::String: return "string";
    case ValueType::Choice: return "choice";
  }
  return "?";
}

// A bound as a reader writes it: integers without a fraction, large ones in powers of two or ten.
std::string bound(double value) {
  std::ostringstream out;
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    const auto n = static_cast<long long>(value);
    if (n >= 1024 && (n & (n - 1)) == 0) return "2^" + std::to_string(static_cast<int>(std::log2(value)));
    out << n;
    return out.str();
  }
  out << value;
  return out.str();
}

std::string allowed(const KeySpec& spec) {
  if (spec.type == ValueType::Choice) {
    std::string list;
    for (const auto& c : spec.choices) list += (list.empty() ? "`" : ", `") + c + "`";
    return list;
  }
  if (spec.type == ValueType::Int || spec.type == ValueType::Float) return bound(spec.min) + " .. " + bound(spec.max);
  return "";
}

// Markdown table cells cannot hold a bare '|'.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string config_reference_markdown() {
  std::ostringstream md;
  md << "# Configuration reference\n\n"
     << "Every key sinklm reads, with its type, default, allowed values and meaning. Set keys in a YAML file\n"
     << "(nested: `model:` / `sink:` / `mode: token`) or on the command line with `--set model.sink.mode=token`.\n"
     << "A key not listed here, a value of the wrong type or one out of range is an error naming the key.\n\n"
     << "Generated from `core/config/config_schema.cpp` by `sinklm config --markdown > docs/configuration.md`; do not\n"
     << "edit by hand (a test fails when this file and the schema differ).\n";
  std::string section;
  for (const KeySpec& spec : config_schema()) {
    const std::string top = spec.key.substr(0, spec.key.find('.'));
    if (top != section) {
      section = top;
      md << "\n## " << section << "\n\n| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
    }
    md << "| `" << spec.key << "` | " << type_name(spec.type) << " | `"
       << (spec.default_value.empty() ? std::string("\"\"") : spec.default_value) << "` | " << cell(allowed(spec))
       << " | " << cell(spec.help) << " |\n";
  }
  return md.str();
}

}  // namespace sinklm
