#include "core/args.h"

#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/text_distance.h"

namespace sinklm {

Args::Args(std::string command, std::string synopsis, std::vector<FlagSpec> flags,
           const std::vector<std::string>& argv)
    : command_(std::move(command)), synopsis_(std::move(synopsis)), flags_(std::move(flags)) {
  std::vector<std::string> names;
  for (const auto& f : flags_) names.push_back("--" + f.name);
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    if (word == "-h" || word == "--help") {
      help_ = true;
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

int64_t Args::get_int(const std::string& name, int64_t fallback) const {
  if (!has(name)) return fallback;
  std::string text = get(name);
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (...) {
  }
  fail("sinklm ", command_, ": option --", name, " must be an integer, got '", text, "'");
}

double Args::get_double(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  std::string text = get(name);
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (...) {
  }
  fail("sinklm ", command_, ": option --", name, " must be a number, got '", text, "'");
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  return has(name) ? values_.at(name) : std::vector<std::string>{};
}

bool Args::print_help_if_requested() const {
  if (help_) std::cout << usage();
  return help_;
}

std::string Args::usage() const {
  std::ostringstream out;
  out << "usage: sinklm " << command_ << " " << synopsis_ << "\n\noptions:\n";
  for (const auto& f : flags_) {
    std::string left = "--" + f.name + (f.value_name.empty() ? "" : " " + f.value_name);
    out << "  " << left << std::string(left.size() < 28 ? 28 - left.size() : 1, ' ') << f.help << "\n";
  }
  return out.str();
}

}  // namespace sinklm
