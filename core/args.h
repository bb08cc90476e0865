// Command-line options of one subcommand: `--name value`, `--flag`, repeated `--set k=v`, positionals.
// An unknown option is a UserError that suggests the closest known one.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace sinklm {

struct FlagSpec {
  std::string name;  // without the leading "--"
  std::string value_name;  // "" for a boolean flag
  std::string help;
};

class Args {
 public:
  Args(std::string command, std::string synopsis, std::vector<FlagSpec> flags, const std::vector<std::string>& argv);

  bool help_requested() const { return help_; }
  std::string usage() const;
  // Prints usage() to stdout when -h/--help was given; the caller then returns 0.
  bool print_help_if_requested() const;

  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::string require(const std::string& name) const;  // UserError when missing
  int64_t get_int(const std::string& name, int64_t fallback) const;
  double get_double(const std::string& name, double fallback) const;  // UserError naming the flag if not a number
  std::vector<std::string> get_all(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  const FlagSpec& spec(const std::string& name) const;

  std::string command_;
  std::string synopsis_;
  std::vector<FlagSpec> flags_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
  bool help_ = false;
};

}  // namespace sinklm
