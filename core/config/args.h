// Command-line options of one subcommand: `--name value`, `--flag`, repeated `--set k=v`, positionals.
// An unknown option is a UserError that suggests the closest known one.
//
// A flag is declared once, bound to the field of the command's option struct that it sets:
//   flag(&o.http_threads, "http-workers", "N", "threads serving complete requests", Range{1, 4096})
// The field's value before parsing is the default; --help, the range check (a UserError naming the flag)
// and docs/cli.md (`sinklm help --markdown`) all come from that declaration.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace sinklm {

// Inclusive bounds of a numeric flag.
struct Range {
  double min, max;
};

struct FlagSpec {
  std::string name;  // without the leading "--"
  std::string value_name;  // "" for a boolean flag
  std::string help;
  std::string default_text = "";  // as docs and --help print it; "" = none
  std::string range_text = "";    // "[1, 4096]"; "" = any
  // Bound flags: parses, checks and stores one given value (text; "true" for a switch), or fails naming the
  // flag. Unbound flags are read with Args::get and friends.
  std::function<void(const std::string& value)> bind = nullptr;
};

// The bound forms. Integers and numbers take a Range; a bool is a switch (given = true); a vector of strings
// collects every occurrence of a repeated flag; a vector of integers is one comma-separated list ("4,8,16",
// each item in the Range; a later occurrence replaces an earlier one); a string takes its value as it is.
FlagSpec flag(std::string* field, std::string name, std::string value_name, std::string help);
FlagSpec flag(int64_t* field, std::string name, std::string value_name, std::string help, Range range);
FlagSpec flag(int* field, std::string name, std::string value_name, std::string help, Range range);
FlagSpec flag(size_t* field, std::string name, std::string value_name, std::string help, Range range);
FlagSpec flag(double* field, std::string name, std::string value_name, std::string help, Range range);
FlagSpec flag(bool* field, std::string name, std::string help);
FlagSpec flag(std::vector<std::string>* field, std::string name, std::string value_name, std::string help);
FlagSpec flag(std::vector<int64_t>* field, std::string name, std::string value_name, std::string help, Range range);
// The word that asks a command for markdown() instead of usage(): docs/cli.md is every command's answer.
constexpr const char* kMarkdownHelp = "--help-markdown";

class Args {
 public:
  Args(std::string command, std::string synopsis, std::vector<FlagSpec> flags, const std::vector<std::string>& argv);

  bool help_requested() const { return help_; }
  // --help-markdown (`sinklm help --markdown` asks every command so): the help as markdown() instead.
  bool markdown_requested() const { return markdown_; }
  std::string usage() const;
  // The flags as a Markdown table (flag, default, range, help): docs/cli.md.
  std::string markdown() const;
  // Prints usage() to stdout when -h/--help was given; the caller then returns 0.
  bool print_help_if_requested() const;

  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::string require(const std::string& name) const;  // UserError when missing
  std::vector<std::string> get_all(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  const FlagSpec& spec(const std::string& name) const;

  std::string command_;
  std::string synopsis_;
  std::vector<FlagSpec> flags_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
  bool help_ = false, markdown_ = false;
};

}  // namespace sinklm
