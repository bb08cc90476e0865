#include "core/config/args.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/config/text_distance.h"

namespace sinklm {
namespace {

bool parse_integer(const std::string& text, int64_t* out) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    *out = v;
    return used == text.size();
  } catch (...) {
    return false;
  }
}

bool parse_number(const std::string& text, double* out) {
  try {
    size_t used = 0;
    *out = std::stod(text, &used);
    return used == text.size();
  } catch (...) {
    return false;
  }
}

// Whole numbers up to 1e9 in full (16777216, 1048576), others as %g (0.01, 1e+12).
std::string number_text(double v) {
  char buffer[32];
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v >= -1e9 && v <= 1e9)
    std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(v));
  else
    std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

std::string range_text(Range r) { return "[" + number_text(r.min) + ", " + number_text(r.max) + "]"; }

// The checked value of a numeric flag, or a UserError naming it.
template <typename T>
T checked(const std::string& name, const std::string& text, Range range) {
  constexpr bool integral = std::is_integral_v<T>;
  double value = 0;
  int64_t whole = 0;
  const bool ok = integral ? parse_integer(text, &whole) : parse_number(text, &value);
  if (integral) value = static_cast<double>(whole);
  if (!ok) fail("option --", name, " must be ", integral ? "an integer" : "a number", ", got '", text, "'");
  if (!(value >= range.min && value <= range.max))
    fail("option --", name, " must be in ", range_text(range), ", got ", text);
  return integral ? static_cast<T>(whole) : static_cast<T>(value);
}

template <typename T>
FlagSpec numeric_flag(T* field, std::string name, std::string value_name, std::string help, Range range) {
  FlagSpec spec{name, std::move(value_name), std::move(help), number_text(static_cast<double>(*field)), range_text(range)};
  spec.bind = [field, name, range](const std::string& text) { *field = checked<T>(name, text, range); };
  return spec;
}

}  // namespace

FlagSpec flag(std::string* field, std::string name, std::string value_name, std::string help) {
  FlagSpec spec{std::move(name), std::move(value_name), std::move(help), *field};
  spec.bind = [field](const std::string& text) { *field = text; };
  return spec;
}
FlagSpec flag(int64_t* field, std::string name, std::string value_name, std::string help, Range range) {
  return numeric_flag(field, std::move(name), std::move(value_name), std::move(help), range);
}
FlagSpec flag(int* field, std::string name, std::string value_name, std::string help, Range range) {
  return numeric_flag(field, std::move(name), std::move(value_name), std::move(help), range);
}
FlagSpec flag(size_t* field, std::string name, std::string value_name, std::string help, Range range) {
  return numeric_flag(field, std::move(name), std::move(value_name), std::move(help), range);
}
FlagSpec flag(double* field, std::string name, std::string value_name, std::string help, Range range) {
  return numeric_flag(field, std::move(name), std::move(value_name), std::move(help), range);
}
FlagSpec flag(bool* field, std::string name, std::string help) {
  FlagSpec spec{std::move(name), "", std::move(help)};
  spec.bind = [field](const std::string&) { *field = true; };
  return spec;
}
FlagSpec flag(std::vector<std::string>* field, std::string name, std::string value_name, std::string help) {
  FlagSpec spec{std::move(name), std::move(value_name), std::move(help)};
  spec.bind = [field](const std::string& text) { field->push_back(text); };
  return spec;
}

FlagSpec flag(std::vector<int64_t>* field, std::string name, std::string value_name, std::string help, Range range) {
  std::string shown;
  for (const int64_t v : *field) shown += (shown.empty() ? "" : ",") + std::to_string(v);
  FlagSpec spec{name, std::move(value_name), std::move(help), shown, range_text(range)};
  spec.bind = [field, name, range](const std::string& text) {
    std::vector<int64_t> values;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) values.push_back(checked<int64_t>(name, item, range));
    if (values.empty()) fail("option --", name, " needs a comma-separated list of integers, got '", text, "'");
    *field = std::move(values);
  };
  return spec;
}

Args::Args(std::string command, std::string synopsis, std::vector<FlagSpec> flags,
           const std::vector<std::string>& argv)
    : command_(std::move(command)), synopsis_(std::move(synopsis)), flags_(std::move(flags)) {
  std::vector<std::string> names;
  for (const auto& f : flags_) names.push_back("--" + f.name);
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    if (word == "-h" || word == "--help" || word == kMarkdownHelp) {
      help_ = true;
      markdown_ = markdown_ || word == kMarkdownHelp;
      continue;
    }
    if (word.rfind("--", 0) != 0 || word == "--") {
      positionals_.push_back(word);
      continue;
    }
    std::string name = word.substr(2), value;
    size_t eq = name.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec* found = nullptr;
    for (const auto& f : flags_)
      if (f.name == name) found = &f;
    if (!found)
      fail("sinklm ", command_, ": unknown option '--", name, "'", did_you_mean("--" + name, names),
           "; see 'sinklm ", command_, " --help'");
    if (found->value_name.empty()) {
      if (inline_value) fail("sinklm ", command_, ": option --", name, " takes no value");
      value = "true";
    } else if (!inline_value) {
      if (i + 1 >= argv.size()) fail("sinklm ", command_, ": option --", name, " needs a value (", found->value_name, ")");
      value = argv[++i];
    }
    values_[name].push_back(value);
  }
  if (help_) return;  // --help prints the defaults; nothing is checked
  for (const auto& f : flags_)
    if (f.bind && values_.count(f.name))
      for (const auto& value : values_.at(f.name)) f.bind(value);
}

const FlagSpec& Args::spec(const std::string& name) const {
  for (const auto& f : flags_)
    if (f.name == name) return f;
  SINKLM_ASSERT(false, "option not declared: --", name);
}

bool Args::has(const std::string& name) const {
  spec(name);
  return values_.count(name) > 0;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  return has(name) ? values_.at(name).back() : fallback;
}

std::string Args::require(const std::string& name) const {
  if (!has(name)) fail("sinklm ", command_, ": missing required option --", name, " ", spec(name).value_name);
  return get(name);
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  return has(name) ? values_.at(name) : std::vector<std::string>{};
}

bool Args::print_help_if_requested() const {
  if (help_) std::cout << (markdown_ ? markdown() : usage());
  return help_;
}

std::string Args::usage() const {
  std::ostringstream out;
  out << "usage: sinklm " << command_ << " " << synopsis_ << "\n\noptions:\n";
  for (const auto& f : flags_) {
    std::string left = "--" + f.name + (f.value_name.empty() ? "" : " " + f.value_name);
    std::string right = f.help;
    if (!f.default_text.empty()) right += " (default " + f.default_text + ")";
    if (!f.range_text.empty()) right += " in " + f.range_text;
    out << "  " << left << std::string(left.size() < 28 ? 28 - left.size() : 1, ' ') << right << "\n";
  }
  return out.str();
}

std::string Args::markdown() const {
  std::ostringstream out;
  // The synopsis as typed: its first line after the command, its other lines whole.
  std::istringstream lines(synopsis_);
  out << "```\n";
  bool first = true;
  for (std::string line; std::getline(lines, line); first = false) {
    const size_t start = line.find_first_not_of(' ');
    out << (first ? "sinklm " + command_ + " " : "") << (start == std::string::npos ? "" : line.substr(start)) << "\n";
  }
  out << "```\n\n| flag | default | range | what it does |\n|---|---|---|---|\n";
  auto cell = [](const std::string& text) {
    std::string escaped;
    for (char c : text) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
    return escaped;
  };
  for (const auto& f : flags_) {
    out << "| `--" << f.name << (f.value_name.empty() ? "" : " " + f.value_name) << "` | "
        << (f.default_text.empty() ? "" : "`" + f.default_text + "`") << " | " << f.range_text << " | " << cell(f.help)
        << " |\n";
  }
  return out.str();
}

}  // namespace sinklm
